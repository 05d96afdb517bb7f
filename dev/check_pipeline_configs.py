#!/usr/bin/env python3
"""Checks the arena's registry: loads every file in configs/ (and the private overlay named by
ARENA_PRIVATE_OVERLAY), checks layouts and cross-references, and prints each challenge's composed
pipeline config (`config.toml` of its runs' bundles, in the pipeline's own schema, a placeholder
standing for the collection); exits 1 with every problem (file, field, reason) when something is
wrong. A challenge whose private suite's overlay is not here is said to be not composed.

Usage: python3 dev/check_pipeline_configs.py [PATH_TO_posttrainarena_CLONE] [--configs-dir DIR]

With a clone path it also loads each composed config with the clone's own config loader at the
pipeline commit that challenge pins (a git worktree of the clone at that commit), in a bundle laid
out as the run's (`task-lists/train_dataset.txt` and each `task-lists/eval_suite-NAME.txt`), so a
recipe that needs a newer pipeline, a key the loader does not know or a table it requires fails
here rather than in a paid run. The loader is `load_config(path)` in
pipelines/benchflow-task-posttrain/src/posttrainarena/benchflow_pipeline/config.py
(PIPELINE_LOADER=FILE:FUNCTION names another). ARENA_BIN names a built `arena` binary to use instead
of `cargo run`.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LOADER = "pipelines/benchflow-task-posttrain/src/posttrainarena/benchflow_pipeline/config.py:load_config"
HEADER = re.compile(r"^# (\S+) \((.+?)\) pipeline ([0-9a-f]{40}) (task-lists (.*)|not composed: (.*))$")

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
    """Runs `arena check-configs` and returns (stdout, stderr, code, {challenge: (pin, task lists,
    toml or None, why not)})."""
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
            lists = json.loads(header.group(5)) if header.group(5) else []
            configs[current] = [header.group(3), lists, "" if header.group(5) else None, header.group(6)]
        elif current is not None and configs[current][2] is not None:
            configs[current][2] += line
    return done.stdout, done.stderr, done.returncode, configs


def load_with_pipeline(clone, challenge, pin, task_lists, config_toml, loader):
    """Loads one composed config with the loader at the challenge's pinned commit, in a bundle
    laid out as a run's; returns an error message or None."""
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
            # A placeholder training task, and each held-out suite's own list.
            (run_dir / "task-lists" / "train_dataset.txt").write_text("placeholder-training-task\n")
            for path, ids in task_lists:
                (run_dir / path).write_text("".join(i + "\n" for i in ids))
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
        for challenge, (pin, task_lists, config_toml, why_not) in configs.items():
            if config_toml is None:
                sys.stderr.write("%s: not loaded (%s)\n" % (challenge, why_not))
                continue
            error = load_with_pipeline(Path(args.clone), challenge, pin, task_lists, config_toml, loader)
            if error:
                problems.append("%s: %s" % (challenge, error))
        for problem in problems:
            sys.stderr.write(problem + "\n")
        if problems:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
