"""Figures about the code's shape, for refactoring notes (not a test): the longest functions in
`domain` and `server` (a function over 80 lines whose comments just above it hold a line starting
`Long:` says why, and is listed apart), the import cycles between `server`'s modules, and the `&str`
ids that service functions take (the old `server/src/service/` or, since the feature folders, every
module of a feature but its `api.rs`, `relay.rs`, `repo.rs`, `runs_repo.rs` and `mod.rs`).
Usage: python3 dev/code_metrics.py [--longest N]"""

import argparse
import re
import sys
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
    i = text.find("#[cfg(test)]")
    return text if i < 0 else text[:i]


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
        m = re.match(r"\s*(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+([a-z_0-9]+)", line)
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
    # Strongly connected components (Tarjan).
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
    print(f"import cycles between server modules (groups of modules that use each other): {len(comps)}")
    for c in comps:
        print(f"  {len(c)} modules: {', '.join(c)}")


# A parameter that names a record by id: `run_id: &str`, `challenge: &str`, `id: &str`…
ID_NAME = r"([a-z_]*_id|id|run|challenge|environment|env|submission|agent|account|job|request)"


def is_str_id(param):
    return re.match(ID_NAME + r"\s*:\s*&('[a-z]+\s+)?str$", param) is not None


FEATURE_EDGES = {"api.rs", "relay.rs", "repo.rs", "runs_repo.rs", "mod.rs"}


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
    str_ids()
