"""Runs the shell commands of a served document as written, against the local arena: each ```sh
block's lines, in order, under bash in one working directory, with the document's placeholders and
the Space's address replaced by their local values. Blocks fenced as ```text are instructions the
walk does not run (a browser login, starting a paid run); the test that walks a document says so."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SPACE = "https://openenvarena-arena.hf.space"
DEMO = Path(__file__).resolve().parents[2] / "dev" / "demo" / "collection"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
HEADING = re.compile(r"^#{2,3} (.+)$", re.M)


def sections(markdown):
    """[(heading, [command lines of its ```sh blocks])] in document order."""
    out, heading = [], ""
    marks = [(m.start(), "heading", m.group(1)) for m in HEADING.finditer(markdown)]
    marks += [(m.start(), "fence", m) for m in FENCE.finditer(markdown)]
    current = []
    for _, kind, value in sorted(marks, key=lambda t: t[0]):
        if kind == "heading":
            # A heading inside a fence (a comment line in a shell block) is not a heading.
            if any(f.start() < _ < f.end() for f in FENCE.finditer(markdown)):
                continue
            if current:
                out.append((heading, current))
            heading, current = value, []
        elif value.group(1) == "sh":
            current += commands(value.group(2))
    if current:
        out.append((heading, current))
    return out


def commands(block):
    """A shell block's commands: one per line, a line ending in `|`, `&&` or `\\` continued on
    the next; comment lines dropped."""
    out, pending = [], ""
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pending = pending + " " + line.strip() if pending else line.strip()
        if pending.endswith(("|", "&&", "\\")):
            pending = pending.rstrip("\\").rstrip()
            continue
        out.append(pending)
        pending = ""
    if pending:
        out.append(pending)
    return out


class Walk:
    """One walk: a working directory, an environment and the placeholder values (a value may be a
    function, read when a line is run, for ids that earlier commands print)."""

    def __init__(self, workdir, arena_url, env, values):
        self.workdir, self.arena_url, self.values = workdir, arena_url, values
        self.env = {"PATH": os.environ.get("PATH", ""), "ARENA_URL": arena_url, "HOME": str(workdir / "home"),
                    "HF_HUB_DISABLE_TELEMETRY": "1", "NO_COLOR": "1"}
        self.env.update(env)
        (workdir / "home").mkdir(parents=True, exist_ok=True)
        self.log = []

    def line(self, text):
        out = text.replace(SPACE, self.arena_url)
        # Longest placeholder first, so that ENVIRONMENT_ID is not read as a part of something shorter.
        for key in sorted(self.values, key=len, reverse=True):
            if key in out:
                value = self.values[key]
                out = out.replace(key, value() if callable(value) else value)
        return out

    def run(self, text, allowed=(0,), timeout=180):
        command = self.line(text)
        # Variables a command sets (`BASE=… TOKEN=…`) are kept for the next ones, as in one shell.
        saved = self.workdir / ".walk-env"
        script = "set -a\n%s\n__walk_rc=$?\nenv -0 > %s\nexit $__walk_rc\n" % (command, saved)
        done = subprocess.run(["bash", "-c", script], cwd=self.workdir, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        if saved.exists():
            for item in saved.read_text().split("\0"):
                name, sep, value = item.partition("=")
                if sep and name not in ("PWD", "OLDPWD", "SHLVL", "_", "__walk_rc"):
                    self.env[name] = value
            saved.unlink()
        self.log.append((command, done.returncode))
        assert done.returncode in allowed, "`%s` exited %d (allowed %s)\nstdout: %s\nstderr: %s" % (
            command, done.returncode, allowed, done.stdout[-2000:], done.stderr[-2000:])
        return done


def stand_in_github_example():
    """benchflow-ai/posttrainarena on the stand-in, with the demo expense-report task as
    submissions/team-dogfood; returns its commit."""
    repos = os.environ.get("ARENA_TEST_HUB_REPOS")
    if not repos:
        pytest.fail("ARENA_TEST_HUB_REPOS is not set: run these tests through dev/test")
    repo = Path(repos) / "github" / "benchflow-ai" / "posttrainarena"
    if not repo.exists():
        work = repo.with_name("posttrainarena.partial")
        shutil.rmtree(work, ignore_errors=True)
        task = work / "submissions" / "team-dogfood"
        shutil.copytree(DEMO / "envs" / "expense-report", task / "envs" / "expense-report")
        (task / "submission.yaml").write_text("team_name: team-dogfood\ntrack: environments\n")
        env = {"PATH": os.environ["PATH"], "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
               "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "starter"]):
            subprocess.run(["git", "-C", str(work), *args], env=env, check=True, capture_output=True)
        work.rename(repo)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
