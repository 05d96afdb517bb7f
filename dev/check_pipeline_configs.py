#!/usr/bin/env python3
"""Checks the arena's registry: loads every file in configs/ (and the private overlay named by
ARENA_PRIVATE_OVERLAY), checks layouts and cross-references, and prints each challenge's composed
run config; exits 1 with every problem (file, field, reason) when something is wrong.

Usage: python3 dev/check_pipeline_configs.py [PATH_TO_posttrainarena_CLONE] [--configs-dir DIR]

With a clone path it also loads each composed config with the config loader of the pipeline commit
that challenge pins, from a git worktree of the clone at that commit, so a recipe that needs a newer
pipeline fails here rather than in a paid run. The loader is `load_config(path)` in
pipelines/benchflow-task-posttrain/src/posttrainarena/benchflow_pipeline/config.py
(PIPELINE_LOADER=FILE:FUNCTION names another). ARENA_BIN names a built `arena` binary to use instead
of `cargo run`.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOADER = "pipelines/benchflow-task-posttrain/src/posttrainarena/benchflow_pipeline/config.py:load_config"
HEADER = re.compile(r"^# (\S+) \((.+)\)$")
COMMIT = re.compile(r'^commit = "([0-9a-f]{40})"$', re.M)

# Runs in a fresh interpreter per challenge, so modules of different pipeline commits never mix.
# The loader file is imported by path: the package's __init__ pulls the training stack.
LOAD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("pipeline_config", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["pipeline_config"] = module
spec.loader.exec_module(module)
getattr(module, sys.argv[2])(sys.argv[3])
"""


def composed_configs(configs_dir):
    """Runs `arena check-configs` and returns (stdout, stderr, code, {challenge: toml})."""
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "arena-target"))
    args = ["check-configs", "--configs-dir", str(configs_dir)]
    if os.environ.get("ARENA_BIN"):
        cmd = [os.environ["ARENA_BIN"]] + args
    else:
        cmd = ["cargo", "run", "-q", "-p", "server", "--bin", "arena", "--"] + args
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    configs, current = {}, None
    for line in done.stdout.splitlines(keepends=True):
        header = HEADER.match(line.rstrip("\n"))
        if header:
            current = header.group(1)
            configs[current] = ""
        elif current is not None:
            configs[current] += line
    return done.stdout, done.stderr, done.returncode, configs


def load_with_pipeline(clone, challenge, config_toml, loader):
    """Loads one composed config with the loader at the challenge's pinned commit; returns an
    error message or None."""
    pins = COMMIT.findall(config_toml)
    if len(pins) != 1:
        return "its composed config names %d pipeline commits" % len(pins)
    pin = pins[0]
    found = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", pin + "^{commit}"], capture_output=True)
    if found.returncode != 0:
        return "the clone at %s does not hold the pinned pipeline commit %s" % (clone, pin)
    loader_file, _, function = loader.partition(":")
    with tempfile.TemporaryDirectory(prefix="pipeline-check-") as tmp:
        tree = Path(tmp) / "pipeline"
        added = subprocess.run(["git", "-C", str(clone), "worktree", "add", "--detach", str(tree), pin],
                               capture_output=True, text=True)
        if added.returncode != 0:
            return "git worktree add at %s failed: %s" % (pin, added.stderr.strip())
        try:
            source = tree / loader_file
            if not source.is_file():
                return "pipeline commit %s has no config loader at %s" % (pin, loader_file)
            run_dir = Path(tmp) / "run"
            (run_dir / "task-lists").mkdir(parents=True)
            for name in ("train_dataset.txt", "eval_dataset.txt"):
                (run_dir / "task-lists" / name).write_text("")
            config = run_dir / "config.toml"
            config.write_text(config_toml)
            loaded = subprocess.run([sys.executable, "-c", LOAD, str(source), function or "load_config", str(config)],
                                    cwd=run_dir, capture_output=True, text=True)
            if loaded.returncode != 0:
                last = loaded.stderr.strip().splitlines()
                return "the config loader of pipeline commit %s refused it: %s" % (
                    pin, last[-1] if last else "exit %d" % loaded.returncode)
            sys.stderr.write("%s: loaded by the config loader of pipeline commit %s\n" % (challenge, pin))
            return None
        finally:
            subprocess.run(["git", "-C", str(clone), "worktree", "remove", "--force", str(tree)], capture_output=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clone", nargs="?", help="a clone of benchflow-ai/posttrainarena")
    parser.add_argument("--configs-dir", default=str(ROOT / "configs"))
    args = parser.parse_args(argv[1:])
    stdout, stderr, code, configs = composed_configs(args.configs_dir)
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    if code != 0:
        return 1
    if args.clone:
        loader = os.environ.get("PIPELINE_LOADER", DEFAULT_LOADER)
        problems = []
        for challenge, config_toml in configs.items():
            error = load_with_pipeline(Path(args.clone), challenge, config_toml, loader)
            if error:
                problems.append("%s: %s" % (challenge, error))
        for problem in problems:
            sys.stderr.write(problem + "\n")
        if problems:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
