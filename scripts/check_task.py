#!/usr/bin/env python3
"""Open Env Arena: check the structure of a task collection before you publish it.

    python3 check_task.py PATH

PATH is a collection root (the directory that holds `envs/` or `tasks/`), the `envs/` or `tasks/`
directory itself, or one task's directory. The script reads every file under PATH (leaving out
`.git/` directories; a symbolic link is sent as a link, with its target, and never followed) and
sends them to the arena's public check, `POST /api/check`, which runs the same structure check as
validation and stores nothing. No token is ever sent. At most 20,000 files and 32 MiB are sent.

Python 3.9 or later, standard library only. The arena's JSON answer goes to stdout and a readable
summary to stderr. The static quality gates are `python3 validation_gates.py static PATH`.

Environment:
  ARENA_URL      the arena (default https://openenvarena-arena.hf.space); plain http:// only for
                 127.0.0.1, localhost and ::1

Exit status: 0 the structure is sound, 1 the check found errors (or the arena answered an error, or
could not be reached), 2 a usage error (a bad PATH or ARENA_URL, or too many files or bytes).
"""

import argparse
import base64
import ipaddress
import json
import os
import socket
import stat
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 120
USER_AGENT = "arena-check-task/1"
SCOPE = "structure"

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


# @include arena_http.py

# @include report.py

# @include upload.py


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="check_task.py",
        description="Check a task collection's structure with the arena's public check (no token, stores nothing).",
        epilog="Exit status: 0 sound, 1 errors found or an error answer, 2 a usage error.",
    )
    parser.add_argument("path", metavar="PATH", help="a collection root, its envs/ (or tasks/) directory, or one task")
    args = parser.parse_args(argv)
    try:
        report, lines = run_check(args.path, SCOPE)
    except CliError as e:
        if e.body is not None:
            emit(e.body)
        sys.stderr.write("error: %s\n" % e)
        return e.status
    except KeyboardInterrupt:
        return EXIT_ERROR
    if report.get("errors") or not is_valid(report):
        lines.append("Next: fix every error and run check_task.py again.")
        summary("\n".join(lines))
        return EXIT_ERROR
    lines.append("Next: python3 validation_gates.py static %s (the static quality gates)." % args.path)
    summary("\n".join(lines))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
