#!/usr/bin/env python3
"""Open Env Arena: the task-quality gates.

    python3 validation_gates.py static PATH
    python3 validation_gates.py collect --plan plan.json --jobs-root DIR

`static` runs the static gates on a collection before you publish it. PATH is a collection root
(the directory that holds `envs/` or `tasks/`), the `envs/` or `tasks/` directory itself, or one
task's directory. The script reads every file under PATH (leaving out `.git/` directories; a
symbolic link is sent as a link, with its target, and never followed) and sends them to the arena's
public check, `POST /api/check`, which runs the structure check and the static gates that
validation runs and stores nothing. No token is ever sent. At most 20,000 files and 32 MiB are sent.
Validation checks the published commit again.

`collect` builds the dynamic gates' results.json from an organizer's job outputs, for
`arena_cli.py gates attach`. It reads, for every task and kind (oracle, noop, band) of the plan, the
trial folders under DIR/gates/TASK/KIND/ (the plan's commands write there): a trial is a directory
holding `result.json` (`{"reward": number or null, "checks": [{"name", "passed"}], "error": text or
null}`), or else BenchFlow's `verifier/reward.json` (`{"reward": 1.0}`) or `verifier/reward.txt`;
an `error.txt` beside them, or a trial without a reward, is an infrastructure error. The arena
judges the trials itself; results.json only carries them, with the plan's hash and policy.

Python 3.9 or later, standard library only. The arena's JSON answer goes to stdout and a readable
summary to stderr.

Environment:
  ARENA_URL      the arena (default https://openenvarena-arena.hf.space); plain http:// only for
                 127.0.0.1, localhost and ::1

Exit status: 0 valid (`"valid": true`: sound, and no gate blocks the collection; rejected tasks are
left out but do not fail it, so read `eligible_tasks`), 1 not valid (or the arena answered an error,
or could not be reached), 2 a usage error (a bad PATH or ARENA_URL, too many files or bytes, or a
plan or jobs root that cannot be read).
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
USER_AGENT = "arena-validation-gates/1"
SCOPE = "gates"
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


# ---- shared with check_task.py: each file is downloaded on its own, so each has a copy ----


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

KINDS = ("oracle", "noop", "band")


def cmd_static(args):
    report, lines = run_check(args.path, SCOPE)
    if not is_valid(report):
        lines.append("Next: fix every error and blocking finding, then run validation_gates.py static again.")
        summary("\n".join(lines))
        return EXIT_ERROR
    if report.get("eligible_tasks") == 0:
        lines.append("No task is eligible: fix the findings that exclude tasks and run it again.")
    else:
        lines.append("Next: publish the collection and run python3 arena_cli.py validate --file environment.json.")
    summary("\n".join(lines))
    return EXIT_OK


def read_trial(folder):
    """One trial folder: its reward, whether every check passed, and an infrastructure error."""
    def load(name):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None

    error = load("error.txt")
    result = load("result.json")
    if result is not None:
        try:
            data = json.loads(result)
        except ValueError:
            return {"reward": None, "checks_passed": None, "error": "result.json is not JSON"}
        checks = data.get("checks")
        passed = None if not isinstance(checks, list) else all(bool(c.get("passed")) for c in checks)
        reward = data.get("reward")
        error = data.get("error") or error
    else:
        reward, passed = None, None
        raw = load(os.path.join("verifier", "reward.json"))
        if raw is not None:
            try:
                reward = json.loads(raw).get("reward")
            except (ValueError, AttributeError):
                reward = None
        else:
            raw = load(os.path.join("verifier", "reward.txt"))
            try:
                reward = float(raw.strip()) if raw is not None else None
            except ValueError:
                reward = None
    if not isinstance(reward, (int, float)) or isinstance(reward, bool):
        reward = None
    if reward is None and not error:
        error = "no reward"
    return {"reward": None if error else float(reward), "checks_passed": passed, "error": error or None}


def is_trial(folder):
    return any(os.path.exists(os.path.join(folder, f))
               for f in ("result.json", "error.txt", os.path.join("verifier", "reward.json"),
                         os.path.join("verifier", "reward.txt")))


def trials_under(root):
    """Every trial folder under ROOT, in name order (a trial's own subfolders are not trials)."""
    found = []
    for folder, dirs, _ in os.walk(root):
        dirs.sort()
        if folder != root and is_trial(folder):
            found.append(read_trial(folder))
            dirs[:] = []
    return found


def cmd_collect(args):
    try:
        with open(args.plan, encoding="utf-8") as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise CliError("cannot read the plan %s: %s" % (args.plan, e), EXIT_USAGE)
    if not isinstance(plan, dict) or not plan.get("plan_hash") or not isinstance(plan.get("tasks"), list):
        raise CliError("%s is not a plan from arena_cli.py gates plan" % args.plan, EXIT_USAGE)
    if not os.path.isdir(args.jobs_root):
        raise CliError("%s is not a directory" % args.jobs_root, EXIT_USAGE)
    tasks, lines = [], []
    for task in plan["tasks"]:
        name = task["task"]
        entry = {"task": name}
        counts = []
        for kind in KINDS:
            planned = [r for r in task.get("runs", []) if r.get("kind") == kind]
            if not planned:
                entry[kind] = []
                continue
            trials = trials_under(os.path.join(args.jobs_root, "gates", name, kind))
            entry[kind] = trials
            errors = sum(1 for t in trials if t["error"])
            counts.append("%s %d/%d%s" % (kind, len(trials), planned[0].get("trials", 0),
                                         " (%d infrastructure errors)" % errors if errors else ""))
        tasks.append(entry)
        lines.append("  %s: %s" % (name, ", ".join(counts)))
    results = {"schema_version": 1, "plan_hash": plan["plan_hash"], "environment_id": plan.get("environment_id"),
               "policy": plan.get("policy"), "tasks": tasks}
    emit(results)
    summary("\n".join(["Trials found for plan %s:" % plan["plan_hash"][:12]] + lines + [
        "Next (a BenchFlow editor): python3 arena_cli.py gates attach --challenge %s --id %s --file results.json"
        % (plan.get("challenge_id"), plan.get("environment_id"))]))
    return EXIT_OK


def build_parser():
    parser = argparse.ArgumentParser(
        prog="validation_gates.py",
        description="Open Env Arena task-quality gates.",
        epilog="Exit status: 0 valid, 1 not valid or an error answer, 2 a usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("static", help="the static gates, run by the arena's public check (no token, stores nothing)")
    p.add_argument("path", metavar="PATH", help="a collection root, its envs/ (or tasks/) directory, or one task")
    p.set_defaults(func=cmd_static)
    p = sub.add_parser("collect", help="build the dynamic gates' results.json from the plan's job folders")
    p.add_argument("--plan", required=True, help="the plan from arena_cli.py gates plan")
    p.add_argument("--jobs-root", required=True, help="the directory the plan's jobs wrote to")
    p.set_defaults(func=cmd_collect)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as e:
        if e.body is not None:
            emit(e.body)
        sys.stderr.write("error: %s\n" % e)
        return e.status
    except KeyboardInterrupt:
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
