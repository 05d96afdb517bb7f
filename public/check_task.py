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

DEFAULT_URL = "https://openenvarena-arena.hf.space"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
RETRY_STATUSES = {502, 503, 504}
RETRY_DELAYS_S = (1, 2, 4)
TIMEOUT_S = 120
USER_AGENT = "arena-check-task/1"
SCOPE = "structure"
MAX_FILES = 20000
MAX_BYTES = 32 * 1024 * 1024
# The arena's /api/check takes bodies up to 48 MiB: 32 MiB of files fit once base64-encoded.
MAX_REQUEST_BYTES = 48 * 1024 * 1024
MAX_FINDINGS_SHOWN = 20

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """Ends the command with a message on stderr and an exit status."""

    def __init__(self, message, status=EXIT_ERROR, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


# ---- shared with validation_gates.py: each file is downloaded on its own, so each has a copy ----


def base_url():
    raw = os.environ.get("ARENA_URL", DEFAULT_URL).strip().rstrip("/")
    parsed = urllib.parse.urlsplit(raw)
    host = (parsed.hostname or "").lower()
    if parsed.scheme == "https" and host:
        return raw
    if parsed.scheme == "http" and host in LOCAL_HOSTS:
        return raw
    raise CliError(
        "ARENA_URL must be https://...; plain http:// is accepted only for 127.0.0.1, localhost and ::1",
        EXIT_USAGE,
    )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: the files go to the arena named by ARENA_URL or nowhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise CliError("the arena answered a redirect (HTTP %d to %s); refusing to follow it" % (code, newurl))


_OPENER = urllib.request.build_opener(_NoRedirect())
# A loopback arena is reached directly, whatever proxy the environment names: a proxy would see
# the token in clear on plain HTTP.
_DIRECT_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _opener(url):
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return _DIRECT_OPENER
    try:
        return _DIRECT_OPENER if ipaddress.ip_address(host).is_loopback else _OPENER
    except ValueError:
        return _OPENER


def post_check(data):
    """Sends the encoded request to POST /api/check, without any token; returns the decoded answer.

    The check stores nothing, so it is sent again after 1, 2 and 4 seconds when the Space's proxy
    answers 502, 503 or 504.
    """
    url = base_url() + "/api/check"
    headers = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": USER_AGENT}
    delays = list(RETRY_DELAYS_S)
    while True:
        req = urllib.request.Request(url, data=data, method="POST", headers=headers)
        try:
            with _opener(req.full_url).open(req, timeout=TIMEOUT_S) as resp:
                answer = _try_json(resp.read())
                if answer is None:
                    raise CliError("the arena answered HTTP %d with something that is not JSON" % resp.status)
                return answer
        except urllib.error.HTTPError as e:
            status = e.code
            answer = _try_json(e.read())
            coded = isinstance(answer, dict) and "code" in answer
            if status in RETRY_STATUSES:
                if delays:
                    time.sleep(delays.pop(0))
                    continue
                if not coded:
                    raise CliError(
                        "The Space is briefly unavailable (HTTP %d after %d tries); try again in a minute."
                        % (status, 1 + len(RETRY_DELAYS_S))
                    )
            if coded:
                raise CliError("%s (HTTP %d): %s" % (answer.get("code"), status, answer.get("message", "")), body=answer)
            if status == 413:
                raise CliError("the arena refused the request as too large (HTTP 413); check fewer tasks at a time")
            raise CliError("the arena answered HTTP %d without a JSON error" % status)
        except urllib.error.URLError as e:
            raise CliError("could not reach %s: %s" % (base_url(), e.reason))
        except (socket.timeout, TimeoutError, ConnectionError) as e:
            # socket.timeout is not a TimeoutError before Python 3.10.
            raise CliError("could not reach %s: %s" % (base_url(), e))


def _try_json(raw):
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def _is_task_dir(path):
    return any(os.path.isfile(os.path.join(path, n)) for n in ("task.md", "task.toml"))


def collection_layout(path):
    """How PATH maps onto a collection root: (kind, prefix for every path, extra files).

    A task directory becomes `envs/NAME/...` (a Harbor task in a `tasks/` directory `tasks/NAME/...`),
    an `envs/` (or `tasks/`) directory `envs/...` (or
    `tasks/...`) with its sibling `submission.yaml` when there is one, and a root stays as it is.
    """
    if not os.path.isdir(path):
        raise CliError("%s is not a directory: give a collection, its envs/ directory or one task's directory"
                       % path, EXIT_USAGE)
    root = os.path.abspath(path)
    name = os.path.basename(root)
    if _is_task_dir(root):
        harbor = not os.path.isfile(os.path.join(root, "task.md"))
        parent = "tasks" if harbor and os.path.basename(os.path.dirname(root)) == "tasks" else "envs"
        return "one task", "%s/%s/" % (parent, name), []
    if any(os.path.isdir(os.path.join(root, d)) for d in ("envs", "tasks")) or \
            os.path.isfile(os.path.join(root, "submission.yaml")):
        return "a collection", "", []
    prefix = "tasks/" if name == "tasks" else "envs/"
    manifest = os.path.join(os.path.dirname(root), "submission.yaml")
    extra = [("submission.yaml", manifest)] if name in ("envs", "tasks") and os.path.isfile(manifest) else []
    return ("a tasks/ directory" if prefix == "tasks/" else "an envs/ directory"), prefix, extra


def _walk_error(e):
    raise CliError("cannot read %s: %s" % (e.filename, e.strerror), EXIT_USAGE)


def _entry(rel, full, entries, skipped, total):
    """Adds one file or link (without reading it yet) and returns the new byte total."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise CliError("%s: the file name is not UTF-8; rename it" % full, EXIT_USAGE)
    try:
        st = os.lstat(full)
    except OSError as e:
        raise CliError("cannot read %s: %s" % (full, e.strerror), EXIT_USAGE)
    if stat.S_ISLNK(st.st_mode):
        entries.append((rel, full, True))
        total += len(os.fsencode(os.readlink(full)))
    elif stat.S_ISREG(st.st_mode):
        entries.append((rel, full, False))
        total += st.st_size
    else:
        skipped.append(rel)
        return total
    if len(entries) > MAX_FILES:
        raise CliError("more than %d files under the path: the check takes at most %d; check one task or the envs/ "
                       "directory, not a larger tree" % (MAX_FILES, MAX_FILES), EXIT_USAGE)
    if total > MAX_BYTES:
        raise CliError("the files total more than %d MiB: the check takes at most %d MiB; leave large data out of "
                       "the tasks or check fewer of them at a time" % (MAX_BYTES >> 20, MAX_BYTES >> 20), EXIT_USAGE)
    return total


def collect_files(path):
    """The request's files, named from the collection root, and a line saying what was read.

    Nothing is read before the count and the total size are known to be within the limits.
    """
    kind, prefix, extra = collection_layout(path)
    root = os.path.abspath(path)
    entries, skipped, total = [], [], 0
    for rel, full in extra:
        total = _entry(rel, full, entries, skipped, total)
    for dirpath, dirnames, filenames in os.walk(root, onerror=_walk_error, followlinks=False):
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if d == ".git":
                continue
            if os.path.islink(full):
                rel = prefix + os.path.relpath(full, root).replace(os.sep, "/")
                total = _entry(rel, full, entries, skipped, total)
            else:
                keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            full = os.path.join(dirpath, f)
            rel = prefix + os.path.relpath(full, root).replace(os.sep, "/")
            total = _entry(rel, full, entries, skipped, total)
    files = []
    for rel, full, link in sorted(entries):
        try:
            if link:
                content = os.fsencode(os.readlink(full))
            else:
                with open(full, "rb") as fh:
                    content = fh.read()
        except OSError as e:
            raise CliError("cannot read %s: %s" % (full, e.strerror), EXIT_USAGE)
        files.append({"path": rel, "content_b64": base64.b64encode(content).decode("ascii"), "symlink": link})
    if not files:
        raise CliError("no files under %s" % path, EXIT_USAGE)
    note = "Read %d file%s (%.1f KiB) from %s as %s%s." % (
        len(files), "" if len(files) == 1 else "s", total / 1024.0, path, kind,
        ", sent under %s" % prefix if prefix else "")
    if skipped:
        note += " Left out %d entries that are neither files nor links: %s." % (len(skipped), ", ".join(skipped[:5]))
    return files, note


def check_body(files, scope):
    """The encoded request, refused here when it is larger than the arena takes."""
    data = json.dumps({"files": files, "scope": scope}).encode("utf-8")
    if len(data) > MAX_REQUEST_BYTES:
        raise CliError("the request would be %.1f MiB once base64-encoded: the arena takes at most %d MiB; check "
                       "fewer tasks at a time" % (len(data) / 1048576.0, MAX_REQUEST_BYTES >> 20), EXIT_USAGE)
    return data


def report_lines(report):
    """Readable lines for a validation or check report: the verdict, errors, warnings, gates."""
    lines = []
    errors = report.get("errors") or []
    warnings = report.get("warnings") or []
    counts = []
    if report.get("tasks") is not None:
        counts.append("%s task%s" % (report["tasks"], "" if report["tasks"] == 1 else "s"))
    if report.get("eligible_tasks") is not None:
        counts.append("%s eligible" % report["eligible_tasks"])
    counts.append("%d error%s" % (len(errors), "" if len(errors) == 1 else "s"))
    counts.append("%d warning%s" % (len(warnings), "" if len(warnings) == 1 else "s"))
    valid = report.get("valid")
    if valid is None:
        valid = not errors
    lines.append("%s: %s." % ("Valid" if valid else "NOT valid", ", ".join(counts)))
    source = report.get("source")
    if isinstance(source, dict):
        lines.append(
            "Source: %s %s at %s = commit %s, entry_path %s."
            % (source.get("repo_type"), source.get("repo_id"), source.get("revision"), source.get("commit"),
               json.dumps(source.get("entry_path") or ""))
        )
    if errors:
        lines.append("Errors:")
        for e in errors:
            where = " ".join(str(e[k]) for k in ("task", "file", "field") if e.get(k))
            lines.append("  %s%s: %s" % (e.get("code"), " " + where if where else "", e.get("message", "")))
    if warnings:
        lines.append("Warnings:")
        for w in warnings:
            where = str(w["field"]) if w.get("field") else ""
            if w.get("count") is not None:
                where = (where + " " if where else "") + "(%s)" % w["count"]
            lines.append("  %s%s: %s" % (w.get("code"), " " + where if where else "", w.get("message", "")))
    gates = (report.get("quality_gates") or {}).get("static")
    if isinstance(gates, dict):
        g = gates.get("summary") or {}
        lines.append(
            "Static gates%s: %s tasks: %s blocked, %s rejected, %s eligible (%s need controls, %s for review, %s clean)."
            % (" " + str(gates["version"]) if gates.get("version") else "", g.get("tasks"), g.get("blocked"),
               g.get("rejected"), g.get("eligible"), g.get("needs_controls"), g.get("review"), g.get("clean"))
        )
        findings = gates.get("findings") or []
        if findings:
            lines.append("Findings (%d%s):" % (len(findings), ", the first %d shown" % MAX_FINDINGS_SHOWN
                                               if len(findings) > MAX_FINDINGS_SHOWN else ""))
            for f in findings[:MAX_FINDINGS_SHOWN]:
                where = " ".join(str(f[k]) for k in ("task", "file") if f.get(k))
                lines.append("  %s %s%s: %s" % (f.get("severity"), f.get("code"), " " + where if where else "",
                                                f.get("message", "")))
            if len(findings) > MAX_FINDINGS_SHOWN:
                lines.append("  ... and %d more in the JSON on stdout." % (len(findings) - MAX_FINDINGS_SHOWN))
    excluded = ["%s (%s)" % (t.get("name"), t.get("status")) for t in report.get("task_list") or []
                if isinstance(t, dict) and t.get("status") in ("rejected", "blocked")]
    if excluded:
        lines.append("Not eligible: %s." % ", ".join(excluded))
    return lines


def is_valid(report):
    valid = report.get("valid")
    return (not report.get("errors")) if valid is None else bool(valid)


def emit(answer):
    json.dump(answer, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def summary(text):
    sys.stderr.write(text.rstrip() + "\n")


def run_check(path, scope):
    """Checks PATH with the arena and returns (report, lines for stderr)."""
    base_url()
    files, note = collect_files(path)
    report = post_check(check_body(files, scope))
    emit(report)
    return report, [note] + report_lines(report)


# ---- end of the shared part ----


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
