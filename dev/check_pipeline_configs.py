#!/usr/bin/env python3
"""Checks the arena's registry: loads every file in configs/ (and the private overlay named by
ARENA_PRIVATE_OVERLAY), checks layouts and cross-references, and prints each challenge's composed
run config; exits 1 with every problem (file, field, reason) when something is wrong.

Usage: python3 dev/check_pipeline_configs.py [PATH_TO_posttrainarena_CLONE]

With a clone path it also checks that the clone holds each challenge's pinned pipeline commit.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__)
        return 2
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "arena-target"))
    composed = subprocess.run(
        ["cargo", "run", "-q", "-p", "server", "--bin", "arena", "--", "check-configs",
         "--configs-dir", str(ROOT / "configs")],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    sys.stdout.write(composed.stdout)
    sys.stderr.write(composed.stderr)
    if composed.returncode != 0:
        return 1
    if len(argv) == 2:
        clone = Path(argv[1])
        pins = set(re.findall(r'^commit = "([0-9a-f]{40})"$', composed.stdout, re.M))
        for pin in sorted(pins):
            found = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", pin + "^{commit}"],
                                   capture_output=True)
            if found.returncode != 0:
                sys.stderr.write("the clone at %s does not hold the pinned pipeline commit %s\n" % (clone, pin))
                return 1
            sys.stderr.write("pipeline commit %s is in %s\n" % (pin, clone))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
