"""The uv image's `uv` (`ghcr.io/astral-sh/uv:python3.12-bookworm`), simulated for the stand-in's
jobs: `uv run [--python V] [--with PKG]… SCRIPT ARGS…` fetches a script given by URL (from this
machine only) and runs it on the local Python, which must already hold the script's PEP 723
dependencies (nothing is installed); `uv pip install … SPEC` accepts only the pipeline at a
pinned ref, which the simulated `posttrainarena-train` and `posttrainarena-vllm-serve` on PATH
stand in for."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
import tomllib
import urllib.parse
import urllib.request

from . import SIMULATION

PIPELINE = re.compile(
    r"^posttrainarena-benchflow-pipeline(\[[a-z,]+\])? @ git\+https://github\.com/benchflow-ai/posttrainarena\.git"
    r"@(?P<ref>[0-9A-Za-z._/-]+)#subdirectory=pipelines/benchflow-task-posttrain$"
)
HEADER = re.compile(r"(?m)^# /// script\s*$\n(?P<body>(?:^#(?: .*)?$\n)+?)^# ///\s*$")
MODULES = {"huggingface_hub": "huggingface_hub", "websockets": "websockets", "tomli-w": "tomli_w"}


def fail(message: str, code: int = 2) -> int:
    print(f"uv ({SIMULATION}): {message}", file=sys.stderr)
    return code


def fetch(url: str) -> str:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(fail(f"the simulated image reaches this machine only, not {host}", 1))
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read()
    fd, path = tempfile.mkstemp(prefix="uv-script-", suffix=".py")
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    return path


def dependencies(path: str) -> list[str]:
    match = HEADER.search(open(path, encoding="utf-8").read())
    if not match:
        return []
    body = "\n".join(line[2:] if line.startswith("# ") else "" for line in match.group("body").splitlines())
    return tomllib.loads(body).get("dependencies", [])


def run(argv: list[str]) -> int:
    python, extra = None, []
    while argv and argv[0].startswith("-"):
        flag = argv.pop(0)
        if flag in ("--python", "-p", "--with"):
            if not argv:
                return fail(f"{flag} needs a value")
            value = argv.pop(0)
            python = value if flag != "--with" else python
            extra += [value] if flag == "--with" else []
        elif flag in ("-q", "--quiet", "--no-project"):
            continue
        else:
            return fail(f"unexpected argument '{flag}'")
    if not argv:
        return fail("`uv run` needs a script")
    script, args = argv[0], argv[1:]
    if script.startswith(("http://", "https://")):
        script = fetch(script)
    missing = []
    for dep in [*dependencies(script), *extra]:
        name = re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0].strip()
        module = MODULES.get(name, name.replace("-", "_"))
        if importlib.util.find_spec(module) is None:
            missing.append(name)
    if missing:
        return fail(f"this machine's Python lacks {', '.join(missing)} (the simulated image installs nothing)", 1)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(f"uv ({SIMULATION}): running the script on this machine's Python {here}"
          + (f" in place of Python {python}" if python and python != here else ""), file=sys.stderr, flush=True)
    os.execv(sys.executable, [sys.executable, script, *args])
    return 0


def pip_install(argv: list[str]) -> int:
    specs = []
    while argv:
        flag = argv.pop(0)
        if flag in ("--python", "--torch-backend", "-p"):
            if not argv:
                return fail(f"{flag} needs a value")
            argv.pop(0)
        elif flag.startswith("-"):
            return fail(f"unexpected argument '{flag}'")
        else:
            specs.append(flag)
    for spec in specs:
        if spec.startswith("trackio=="):
            print(f"uv ({SIMULATION}): {spec} is not installed here; the simulated trainer says where it would log",
                  file=sys.stderr, flush=True)
            continue
        match = PIPELINE.match(spec)
        if not match:
            return fail(f"the simulated image installs the pipeline only, not `{spec}`", 1)
        print(f"uv ({SIMULATION}): the stand-in's simulated posttrainarena-train and posttrainarena-vllm-serve "
              f"stand in for posttrainarena-benchflow-pipeline at {match.group('ref')}", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        return run(argv[1:])
    if argv[:2] == ["pip", "install"]:
        return pip_install(argv[2:])
    return fail("the simulated image's uv runs `uv run` and `uv pip install` only")
