#!/usr/bin/env python3
"""Fingerprints a held-out suite (prompt 13-gram hashes and file blob ids, template text set apart)
so the static gates can check collections against it without its tasks.

Usage: python3 dev/fingerprint_suite.py SUITE --source DIR [--revision REV] [--out FILE]

SUITE is a suite id from configs/suites/ (or --configs-dir); its [meta] says whether it is sealed.
DIR holds the suite's tasks (`envs/` or `tasks/`); with --revision, DIR is a git clone and the
suite is read from a worktree at that pinned revision, not from whatever is checked out.
The fingerprint is written where the arena reads it: a private suite's to
$ARENA_FINGERPRINTS_DIR (default: fingerprints/ in $ARENA_PRIVATE_OVERLAY), a public suite's to the
file its [meta] names beside its task list in fixture/task-lists/; --out FILE (or -) overrides.
ARENA_BIN names a built `arena` binary to use instead of `cargo run`.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def destination(args, suite_id, meta):
    if args.out:
        return None if args.out == "-" else Path(args.out)
    if meta.get("private"):
        folder = os.environ.get("ARENA_FINGERPRINTS_DIR")
        if not folder and os.environ.get("ARENA_PRIVATE_OVERLAY"):
            folder = str(Path(os.environ["ARENA_PRIVATE_OVERLAY"]) / "fingerprints")
        if not folder:
            raise SystemExit("%s is private: set ARENA_PRIVATE_OVERLAY (or ARENA_FINGERPRINTS_DIR) or pass --out" % suite_id)
        return Path(folder) / ("%s.json" % suite_id)
    if meta.get("fingerprints"):
        return Path(args.configs_dir) / "fixture" / "task-lists" / meta["fingerprints"]
    raise SystemExit("%s is public and its [meta] names no fingerprints file: add `fingerprints = \"FILE.json\"` or pass --out" % suite_id)


def fingerprint(source, suite_id, sealed):
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "arena-target"))
    args = ["fingerprint-suite", str(source), "--suite", suite_id] + (["--sealed"] if sealed else [])
    if os.environ.get("ARENA_BIN"):
        cmd = [os.environ["ARENA_BIN"]] + args
    else:
        cmd = ["cargo", "run", "-q", "-p", "server", "--bin", "arena", "--"] + args
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(done.returncode)
    return done.stdout


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--source", required=True, help="the suite's tasks (envs/ or tasks/), or a git clone with --revision")
    parser.add_argument("--revision", help="the pinned revision of the suite in the clone at --source")
    parser.add_argument("--configs-dir", default=str(ROOT / "configs"))
    parser.add_argument("--out", help="where to write the fingerprint (- for stdout)")
    args = parser.parse_args(argv[1:])
    fragment = Path(args.configs_dir) / "suites" / ("%s.toml" % args.suite)
    if not fragment.is_file():
        raise SystemExit("no suite %s: %s does not exist" % (args.suite, fragment))
    meta = tomllib.loads(fragment.read_text()).get("meta", {})
    out = destination(args, args.suite, meta)
    source = Path(args.source)
    if args.revision:
        with tempfile.TemporaryDirectory(prefix="suite-") as tmp:
            tree = Path(tmp) / "suite"
            added = subprocess.run(["git", "-C", str(source), "worktree", "add", "--detach", str(tree), args.revision],
                                   capture_output=True, text=True)
            if added.returncode != 0:
                raise SystemExit("git worktree add at %s failed: %s" % (args.revision, added.stderr.strip()))
            try:
                text = fingerprint(tree, args.suite, bool(meta.get("sealed")))
            finally:
                subprocess.run(["git", "-C", str(source), "worktree", "remove", "--force", str(tree)], capture_output=True)
    else:
        text = fingerprint(source, args.suite, bool(meta.get("sealed")))
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        sys.stderr.write("wrote %s\n" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
