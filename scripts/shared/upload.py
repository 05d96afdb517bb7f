# Shared by check_task.py and validation_gates.py: dev/assemble_scripts.py puts this file
# where a script says `# @include upload.py`, so that each served file stays one standalone download.

MAX_FILES = 20000
MAX_BYTES = 32 * 1024 * 1024
# The arena's /api/check takes bodies up to 48 MiB: 32 MiB of files fit once base64-encoded.
MAX_REQUEST_BYTES = 48 * 1024 * 1024


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


def run_check(path, scope):
    """Checks PATH with the arena and returns (report, lines for stderr)."""
    base_url()
    files, note = collect_files(path)
    report = post_check(check_body(files, scope))
    emit(report)
    return report, [note] + report_lines(report)
