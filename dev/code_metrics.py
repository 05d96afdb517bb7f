"""Figures about the code's shape, for refactoring notes (not a test): the longest functions in
`domain` and `server` (a function over 80 lines whose comments just above it hold a line starting
`Long:` says why, and is listed apart), the import cycles between `server`'s modules, the circles
between files of every crate (following `use` and inline paths from file to file), the handlers
(`api.rs`) that reach a feature's `repo`, the `&str` ids that service functions take (the old
`server/src/service/` or, since the feature folders, every module of a feature but its `api.rs`,
`relay.rs`, `repo.rs` and `mod.rs`), and the lines the `duplicates` command (the
tool library's, where it is installed) finds between the served scripts.
Every function outside tests in `domain`, `server`, `standin` and `app` over 100 lines is listed
too, reason or not: none should be.
Usage: python3 dev/code_metrics.py [--longest N]"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rust_files(crate):
    return sorted(p for p in (ROOT / crate / "src").rglob("*.rs"))


def module_of(crate, path):
    rel = path.relative_to(ROOT / crate / "src").with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts) or "crate"


def strip_tests(text):
    """The file without its `#[cfg(test)]` module (a crude cut: from the attribute to the end)."""
    found = [i for i in (text.find("#[cfg(test)]"), text.find("#[cfg(all(test")) if i >= 0]
    return text[: min(found)] if found else text


def reason_above(lines, i):
    """The `Long:` reason in the comments and attributes just above line `i`, if any."""
    j = i - 1
    while j >= 0 and re.match(r"\s*(//|#\[)", lines[j]):
        m = re.match(r"\s*//[/!]?\s*Long:\s*(.*)", lines[j])
        if m:
            return m.group(1)
        j -= 1
    return None


def functions(text, with_reason=False):
    """(name, first line, length in lines) of each `fn` with a body, by brace matching."""
    out = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+([A-Za-z_0-9]+)", line)
        if not m:
            continue
        reason = reason_above(lines, i)
        depth, started = 0, False
        for j in range(i, len(lines)):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
            for ch in code:
                if ch == "{":
                    depth += 1
                    started = True
                elif ch == "}":
                    depth -= 1
            if started and depth == 0:
                out.append((m.group(4), i + 1, j - i + 1) + ((reason,) if with_reason else ()))
                break
            if not started and code.rstrip().endswith(";"):
                break
    return out


def longest(n):
    rows = []
    for crate in ("domain", "server"):
        for p in rust_files(crate):
            for name, line, length, reason in functions(strip_tests(p.read_text()), with_reason=True):
                rows.append((length, f"{p.relative_to(ROOT)}:{line}", name, reason))
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    over = [r for r in rows if r[0] > 80 and not r[3]]
    excused = [r for r in rows if r[0] > 80 and r[3]]
    print(f"functions over 80 lines (domain, server, tests excluded), without a reason: {len(over)}")
    for length, where, name, _ in over + [r for r in rows if r[0] <= 80][: max(0, n - len(over))]:
        print(f"  {length:4d}  {name}  {where}")
    print(f"functions over 80 lines with a reason above them: {len(excused)}")
    for length, where, name, reason in excused:
        print(f"  {length:4d}  {name}  {where}: {reason}")
    # The hard limit, with or without a reason, in every crate that ships (tests excluded).
    long = []
    for crate in ("domain", "server", "standin", "app"):
        for p in rust_files(crate):
            for name, line, length in functions(strip_tests(p.read_text())):
                if length > 100:
                    long.append((length, f"{p.relative_to(ROOT)}:{line}", name))
    print(f"functions over 100 lines (domain, server, standin, app; tests excluded): {len(long)}")
    for length, where, name in sorted(long, reverse=True):
        print(f"  {length:4d}  {name}  {where}")


def strongly_connected(graph):
    """The groups of two or more nodes that reach each other (Tarjan), each sorted."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def expand_use(tree):
    """`a::{b, c::{d as e, self}}` as the paths it names: a::b, a::c::d, a::c."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in filter(None, parts):
            part = re.sub(r"\bas\b.*$", "", part) if "{" not in part else part
            if "{" in part:
                head, inner = part.split("{", 1)
                walk(prefix + head.rstrip(":").split("::") if head.rstrip(":") else prefix, inner[:-1])
            else:
                segs = part.split("::")
                out.append(prefix + (segs[:-1] if segs[-1] == "self" else segs))

    walk([], tree)
    return out


def file_graph(crate):
    """Edges from each file of `crate` to the files whose items it names."""
    files = {module_of(crate, p): p for p in rust_files(crate)}
    graph = {}
    for mod, p in files.items():
        here = mod.split("::") if mod != "crate" else []
        text = strip_tests(p.read_text())
        text = re.sub(r"//[^\n]*", "", text)
        paths = []
        for m in re.finditer(r"\b(?:pub(?:\([a-z]+\))?\s+)?use\s+([^;]+);", text):
            paths += expand_use(m.group(1))
        for m in re.finditer(r"(?<![A-Za-z_0-9:])((?:crate|super|self|[a-z_][a-z_0-9]*)(?:::[A-Za-z_][A-Za-z_0-9]*)+)", text):
            paths.append(m.group(1).split("::"))
        targets = set()
        for segs in paths:
            if segs[0] == "crate":
                absolute = segs[1:]
            elif segs[0] in ("super", "self"):
                base = list(here)
                while segs and segs[0] in ("super", "self"):
                    if segs[0] == "super":
                        base = base[:-1]
                    segs = segs[1:]
                absolute = base + segs
            elif "::".join(here + segs[:1]) in files:
                absolute = here + segs
            else:
                continue
            for k in range(len(absolute), -1, -1):
                cand = "::".join(absolute[:k]) or "crate"
                if cand in files:
                    if cand != mod:
                        targets.add(cand)
                    break
        graph[str(p.relative_to(ROOT / crate / "src"))] = {
            str(files[t].relative_to(ROOT / crate / "src")) for t in targets
        }
    return graph


def file_circles():
    for crate in ("domain", "server", "standin", "app"):
        if not (ROOT / crate / "src").is_dir():
            continue
        comps = strongly_connected(file_graph(crate))
        print(f"file circles in {crate} (groups of files that use each other): {len(comps)}")
        for c in comps:
            print(f"  {len(c)} files: {', '.join(c)}")


def repo_in_handlers():
    rows = []
    for p in sorted((ROOT / "server" / "src").rglob("api.rs")):
        for i, line in enumerate(strip_tests(p.read_text()).split("\n"), 1):
            if re.search(r"\brepo::|::repo\b|\brepo\s*[,}]", line.split("//")[0]):
                rows.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    print(f"handlers (api.rs) naming a feature's repo: {len(rows)}")
    for r in rows:
        print("  " + r)


SERVED_SCRIPTS = ("check_task.py", "validation_gates.py", "arena_cli.py")


def served_duplicates():
    tool = shutil.which("duplicates")
    if not tool:
        print("lines shared between the served scripts: not measured (no `duplicates` command here)")
        return
    # Their sources since they are assembled (scripts/, the shared parts once), else the hand copies.
    sources = ROOT / "scripts" if (ROOT / "scripts" / "arena_cli.py").exists() else ROOT / "public"
    with tempfile.TemporaryDirectory() as d:
        for name in SERVED_SCRIPTS:
            shutil.copy(sources / name, d)
        for shared in sorted((sources / "shared").glob("*.py")):
            shutil.copy(shared, Path(d) / ("shared_" + shared.name))
        out = subprocess.run([tool, "--repo", d, "--most", "200", "--min-lines", "6"], capture_output=True,
                             text=True).stdout
    # Pairs between two files (a script repeating itself is another matter).
    rows = [r for r in re.findall(r"(\S+\.py):(\d+)-(\d+) ~ (\S+\.py):\d+-\d+", out) if r[0] != r[3]]
    shared = sum(int(b) - int(a) + 1 for _, a, b, _ in rows)
    print(f"lines shared between the served scripts' sources ({sources.relative_to(ROOT)}/): {shared} in {len(rows)} runs")


def cycles():
    crate = "server"
    mods = {module_of(crate, p): p for p in rust_files(crate)}
    edges = defaultdict(set)
    for mod, p in mods.items():
        text = strip_tests(p.read_text())
        for m in re.finditer(r"\bcrate::([a-z_0-9]+(::[a-z_0-9]+)*)", text):
            edges[mod].add(m.group(1))
        parent = mod.rsplit("::", 1)[0] if "::" in mod else ""
        for m in re.finditer(r"\bsuper::([a-z_0-9]+)", text):
            edges[mod].add(f"{parent}::{m.group(1)}" if parent else m.group(1))
    # Resolve a path to the longest module it names.
    def resolve(path):
        parts = path.split("::")
        for k in range(len(parts), 0, -1):
            cand = "::".join(parts[:k])
            if cand in mods:
                return cand
        return None
    graph = {m: {r for e in es if (r := resolve(e)) and r != m} for m, es in edges.items()}
    comps = strongly_connected(graph)
    print(f"import cycles between server modules (groups of modules that use each other): {len(comps)}")
    for c in comps:
        print(f"  {len(c)} modules: {', '.join(c)}")


# A parameter that names a record by id: `run_id: &str`, `challenge: &str`, `id: &str`…
ID_NAME = r"([a-z_]*_id|id|run|challenge|environment|env|submission|agent|account|job|request)"


def is_str_id(param):
    return re.match(ID_NAME + r"\s*:\s*&('[a-z]+\s+)?str$", param) is not None


FEATURE_EDGES = {"api.rs", "relay.rs", "repo.rs", "mod.rs"}


def service_files():
    src = ROOT / "server" / "src"
    if (src / "service").is_dir():
        return sorted((src / "service").rglob("*.rs"))
    features = re.findall(r"crate::([a-z_]+)::FEATURE", (src / "lib.rs").read_text())
    return sorted(
        p
        for f in features
        for p in (src / f).glob("*.rs")
        if p.name not in FEATURE_EDGES and f != "identity"
    )


def str_ids():
    total, pairs = 0, 0
    for p in service_files():
        text = strip_tests(p.read_text())
        for m in re.finditer(r"(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+[a-z_0-9]+(<[^>]*>)?\(([^)]*)\)", text, re.S):
            params = [x.strip() for x in m.group(5).split(",") if x.strip()]
            ids = [x for x in params if is_str_id(x)]
            if ids:
                total += 1
                flags = [is_str_id(x) for x in params]
                if any(a and b for a, b in zip(flags, flags[1:])):
                    pairs += 1
    print(f"service functions taking an id as &str: {total}, of which with two adjacent &str ids: {pairs}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--longest", type=int, default=10)
    a = ap.parse_args()
    longest(a.longest)
    cycles()
    file_circles()
    repo_in_handlers()
    str_ids()
    served_duplicates()
