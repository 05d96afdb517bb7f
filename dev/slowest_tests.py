#!/usr/bin/env python3
"""The slowest tests in a test group's log, for dev/test's phase table.

Reads what each runner prints of its tests' durations: cargo-nextest's status lines
(`PASS [  12.345s] server::api follow::…`), pytest's `--durations` section (`12.34s call
tests/cli/…::test_…`) and Node's TAP (`ok 3 - name` then `duration_ms: 1234.5`). Prints the
`--top` slowest, one a line, seconds first; nothing when the log names no duration.

Usage: dev/slowest_tests.py LOG [--top N]"""

from __future__ import annotations

import argparse
import re
import sys

NEXTEST = re.compile(r"^\s*(?:PASS|FAIL|SIGSEGV|SIGABRT|TIMEOUT|LEAK)\s+\[\s*([\d.]+)s\]\s+(?:\(\s*\d+/\d+\)\s+)?(\S.*)$")
PYTEST = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S.*)$")
TAP_OK = re.compile(r"^(\s*)(?:not )?ok \d+ - (.*)$")
TAP_DURATION = re.compile(r"^\s*duration_ms: ([\d.]+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def durations(lines: list[str]) -> dict[str, float]:
    """Each test's seconds, by name (pytest's phases of one test added up)."""
    found: dict[str, float] = {}
    pending: str | None = None
    for raw in lines:
        line = ANSI.sub("", raw.rstrip("\n"))
        if m := NEXTEST.match(line):
            found[m.group(2).strip()] = float(m.group(1))
        elif m := PYTEST.match(line):
            found[m.group(3)] = found.get(m.group(3), 0.0) + float(m.group(1))
        elif m := TAP_OK.match(line):
            # A file's own entry (Node runs each file as a test) is not a test of its own.
            pending = None if m.group(2).endswith((".mjs", ".js")) else m.group(2)
        elif pending and (m := TAP_DURATION.match(line)):
            found[pending] = float(m.group(1)) / 1000
            pending = None
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--top", type=int, default=10)
    args = p.parse_args()
    try:
        with open(args.log, encoding="utf-8", errors="replace") as f:
            found = durations(f.readlines())
    except OSError as e:
        print(f"slowest_tests: {e}", file=sys.stderr)
        return 1
    for name, s in sorted(found.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{s:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
