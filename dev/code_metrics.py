"""Figures about the code's shape, for refactoring notes and for docs/ARCHITECTURE.md (which
tests/cli/test_architecture.py holds to them). Measured on production code only: test modules are
cut where they stand (a `#[cfg(test)] mod tests;` declaration, a `#[cfg(test)] mod tests { … }`
block, any other `#[cfg(test)]` item), and files that are test code (under a `tests/` folder,
named `tests.rs`, or declared by a `#[cfg(test)] mod x;`) are left out.

Per crate (`domain`, `server`, `standin`, `app`):
- its import circles: groups of files that reach each other through `use` trees and paths
  (`crate::…`, `super::…`, `self::…`, a child module's or an imported name's path, as in
  `crate::x::y::f()`), re-exports followed to the file that defines the name; each group is printed
  as the chains of files that close it, each step with the line that names the next file;
- its functions over 80 lines (one whose comments just above it hold a line starting `Long:`
  says why, and is listed apart) and over 100 lines, reason or not: none should be;
- its `Result<_, String>`s and its hand-written `try_get(` calls (rows read column by column).
Besides: the handlers (`api.rs`) that reach a feature's `repo`, the `&str` ids that the server's
service functions take, the Python functions over 80 lines (the served scripts, the job script,
dev/, the trainer and the stand-in's pipeline simulator; the Python tests listed apart), how the
two backends' migrations pair (by name, by number), the workspace's crates each crate depends on,
and the lines the `duplicates` command (the tool library's, where it is installed) finds between
the served scripts. `--json` prints every figure as one object, with the names each module defines
or imports (`items`), for a reader checking the paths a document names.
Usage: python3 dev/code_metrics.py [--longest N] [--json]"""

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CRATES = ("domain", "server", "standin", "app")
LONG, TOO_LONG = 80, 100

# ---------------------------------------------------------------- reading Rust

# What hides code from a reader of tokens: comments, string literals (raw or not) and char literals.
LEXEMES = re.compile(r"""//|/\*|(?<![A-Za-z0-9_])b?r(#*)"|"|'""")
CHAR = re.compile(r"""'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'""")


def mask(text):
    """`text` with comments and the insides of string and char literals turned to spaces, newlines
    kept: same length, same lines, so positions and line numbers still point into `text`."""
    out = list(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    i, n = 0, len(text)
    while True:
        m = LEXEMES.search(text, i)
        if not m:
            break
        start, token = m.start(), m.group(0)
        if token == "//":
            end = text.find("\n", start)
            end = n if end < 0 else end
            blank(start, end)
        elif token == "/*":
            depth, end = 1, start + 2
            while end < n and depth:
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
            blank(start, end)
        elif token == '"':
            end = start + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            blank(start + 1, end)
            end += 1
        elif token == "'":
            c = CHAR.match(text, start)
            end = start + 1  # a lifetime
            if c:
                blank(start + 1, c.end() - 1)
                end = c.end()
        else:  # a raw string: r"…", r#"…"#, br"…"
            close = '"' + m.group(1)
            stop = text.find(close, m.end())
            stop = n if stop < 0 else stop
            blank(m.end(), stop)
            end = stop + len(close)
        i = max(end, start + 1)
    return "".join(out)


def closing(code, i, opening="{", close="}"):
    """The index just past the bracket that closes the one at `i` (in masked code)."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == opening:
            depth += 1
        elif code[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def split_top(text, sep=","):
    """`text` split at each `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>" and not (ch == ">" and text[i - 1 : i] == "-"):
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def cfg_needs_test(predicate):
    """Whether a `cfg(…)` predicate holds only in test builds: `test`, `all(…, test, …)`, or an
    `any(…)` whose every branch needs it."""
    p = re.sub(r"\s+", "", predicate)
    if p == "test":
        return True
    m = re.fullmatch(r"(all|any)\((.*)\)", p)
    if not m:
        return False
    branches = [b for b in split_top(m.group(2)) if b]
    needs = [cfg_needs_test(b) for b in branches]
    return any(needs) if m.group(1) == "all" else bool(needs) and all(needs)


ATTRIBUTE = re.compile(r"#\s*(!?)\s*\[")
ITEM_HEAD = re.compile(r"(?:pub(?:\s*\([^)]*\))?\s+)?(?:unsafe\s+|async\s+|const\s+(?=fn))*([a-z_]+)")
TEST_MOD_DECL = re.compile(r"(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z_0-9]*)\s*;")


def item_end(code, i):
    """The end of the item that starts at `i` (past any attributes): a declaration ends at its `;`,
    an item with a body at the brace that closes it (`use a::{b};`, `const X: S = S { … };`
    run on to their `;`)."""
    while True:
        while i < len(code) and code[i].isspace():
            i += 1
        a = ATTRIBUTE.match(code, i)
        if not a:
            break
        i = closing(code, a.end() - 1, "[", "]")
    head = ITEM_HEAD.match(code, i)
    to_semicolon = head is not None and head.group(1) in ("use", "const", "static", "type", "let", "extern")
    depth = 0
    j = i
    while j < len(code):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == ";" and depth == 0:
            return j + 1
        elif ch == "{" and depth == 0:
            j = closing(code, j)
            if not to_semicolon:
                k = j
                while k < len(code) and code[k] in " \t\r\n":
                    k += 1
                return k + 1 if code[k : k + 1] == ";" else j
            continue
        j += 1
    return len(code)


def test_items(code):
    """The `(start, end, declared module)` of each item that exists only in test builds: from its
    `#[cfg(test)]` to its end; `declared module` names the file a `#[cfg(test)] mod x;` brings in."""
    items = []
    i = 0
    while True:
        a = ATTRIBUTE.search(code, i)
        if not a:
            return items
        end = closing(code, a.end() - 1, "[", "]")
        attr = re.sub(r"\s+", "", code[a.end() : end - 1])
        m = re.fullmatch(r"cfg\((.*)\)", attr)
        if m and cfg_needs_test(m.group(1)):
            if a.group(1):  # `#![cfg(test)]`: the whole file
                return [(0, len(code), None)]
            stop = item_end(code, end)
            body = code[end:stop].strip()
            while ATTRIBUTE.match(body):
                body = body[closing(body, ATTRIBUTE.match(body).end() - 1, "[", "]") :].strip()
            decl = TEST_MOD_DECL.fullmatch(body)
            items.append((a.start(), stop, decl.group(1) if decl else None))
            i = stop
        else:
            i = end


def blank_spans(text, spans):
    out = list(text)
    for start, end in spans:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


@dataclass
class Source:
    """One file of a crate's `src`: its text and its masked code, test items blanked in both."""

    crate: str
    path: Path
    module: list
    text: str
    code: str
    binary: bool = False

    @property
    def rel(self):
        return self.path.relative_to(ROOT / self.crate / "src").as_posix()

    @property
    def where(self):
        return self.path.relative_to(ROOT).as_posix()

    def line_of(self, pos):
        return self.code.count("\n", 0, pos) + 1


def module_of(crate, path):
    parts = list(path.relative_to(ROOT / crate / "src").with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def read_crate(crate):
    """The production files of `crate`: test files (a `tests/` folder, `tests.rs`, a module
    declared under `#[cfg(test)]` and what it holds) left out, test items blanked in the rest."""
    src = ROOT / crate / "src"
    sources, test_modules = [], set()
    for p in sorted(src.rglob("*.rs")):
        text = p.read_text()
        code = mask(text)
        items = test_items(code)
        spans = [(a, b) for a, b, _ in items]
        module = module_of(crate, p)
        for _, _, declared in items:
            if declared:
                test_modules.add("::".join(module + [declared]))
        binary = p.parent == src and p.name == "main.rs" and (src / "lib.rs").exists()
        sources.append(Source(crate, p, module, blank_spans(text, spans), blank_spans(code, spans), binary=binary))

    def is_test(s):
        rel = s.path.relative_to(src)
        if s.path.name == "tests.rs" or "tests" in rel.parts[:-1]:
            return True
        name = "::".join(s.module)
        return any(name == t or name.startswith(t + "::") for t in test_modules)

    return [s for s in sources if not is_test(s)]


def production_lines(sources):
    """Lines with code on them (comments and blank lines not counted)."""
    return sum(1 for s in sources for line in s.code.split("\n") if line.strip())


# ---------------------------------------------------------------- long functions

FN = re.compile(r"^[ \t]*(?:pub(?:\s*\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                r"(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_0-9]+)", re.M)


def reason_above(lines, i):
    """The `Long:` reason in the comments and attributes just above line `i`, if any."""
    j = i - 1
    while j >= 0 and re.match(r"\s*(//|#\[)", lines[j]):
        m = re.match(r"\s*//[/!]?\s*Long:\s*(.*)", lines[j])
        if m:
            return m.group(1)
        j -= 1
    return None


def functions(source):
    """(name, first line, length in lines, reason) of each `fn` with a body."""
    out = []
    lines = source.text.split("\n")
    code = source.code
    for m in FN.finditer(code):
        j = m.end()
        depth = 0
        while j < len(code) and not (code[j] in "{;" and depth == 0):
            depth += code[j] in "([" or -(code[j] in ")]")
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        first = source.line_of(m.start())
        last = source.line_of(closing(code, j) - 1)
        out.append((m.group(1), first, last - first + 1, reason_above(lines, first - 1)))
    return out


def long_functions(sources):
    rows = []
    for s in sources:
        for name, line, length, reason in functions(s):
            rows.append({"name": name, "where": f"{s.where}:{line}", "lines": length, "reason": reason})
    rows.sort(key=lambda r: (-r["lines"], r["where"]))
    return rows


# ---------------------------------------------------------------- the import graph


def expand_use(tree):
    """`a::{b, c::{d as e, self}, f::*}` as (path, name it binds): (a::b, b), (a::c::d, e),
    (a::c, c), (a::f, None)."""
    tree = re.sub(r"\s*(::|[{},])\s*", r"\1", re.sub(r"\s+", " ", tree)).strip()
    out = []

    def walk(prefix, text):
        for part in filter(None, split_top(text)):
            if "{" in part:
                head, inner = part.split("{", 1)
                head = head.rstrip(":")
                walk(prefix + (head.split("::") if head else []), inner[: inner.rindex("}")])
                continue
            alias = None
            m = re.fullmatch(r"(.*) as ([A-Za-z_][A-Za-z_0-9]*)", part)
            if m:
                part, alias = m.group(1), m.group(2)
            segs = prefix + part.split("::")
            if segs[-1] == "*":
                out.append((segs[:-1], None))
            elif segs[-1] == "self":
                out.append((segs[:-1], alias or (segs[-2] if len(segs) > 1 else None)))
            else:
                out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


USE = re.compile(r"\buse\s+([^;]+);")
PATH = re.compile(r"(?<![A-Za-z_0-9:])((?:crate|super|self|[a-z_][a-z_0-9]*)(?:::[A-Za-z_][A-Za-z_0-9]*)+)")


def name_of(parts):
    return "::".join(parts)


class Crate:
    """A crate's modules and what each names, resolved to the file that holds it."""

    def __init__(self, sources):
        self.files = {"::".join(s.module): s for s in sources if not s.binary}
        self.uses = {}
        for name, s in self.files.items():
            binds = {}
            for m in USE.finditer(s.code):
                for segs, alias in expand_use(m.group(1)):
                    if alias and alias != "_":
                        binds[alias] = segs
            self.uses[name] = binds

    def resolve(self, segs, here, depth=0):
        """The file (module name) a path written in module `here` reaches, or None when it leaves
        the crate."""
        if not segs:
            return None
        if segs[0] in ("crate", "$crate"):
            absolute = segs[1:]
        elif segs[0] in ("super", "self"):
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
            absolute = base + segs
        elif name_of(here + segs[:1]) in self.files:
            absolute = here + segs
        elif segs[0] in self.uses.get(name_of(here), {}) and depth < 8:
            bound = self.uses[name_of(here)][segs[0]]
            if bound == segs[:1]:
                return None
            return self.resolve(bound + segs[1:], here, depth + 1)
        else:
            return None
        for k in range(len(absolute), -1, -1):
            name = name_of(absolute[:k])
            if name in self.files:
                # A name the module only re-exports (`pub use x::Name`) is where it comes from.
                if k < len(absolute) and depth < 8 and absolute[k] in self.uses[name]:
                    further = self.resolve(self.uses[name][absolute[k]] + absolute[k + 1 :], absolute[:k], depth + 1)
                    if further is not None:
                        return further
                return name
        return None

    def graph(self):
        """{file: {file it names: line of the first naming}}, relative to `src`."""
        edges = {}
        for name, s in self.files.items():
            found = {}
            rest = s.code
            for m in USE.finditer(s.code):
                for segs, _ in expand_use(m.group(1)):
                    found.setdefault(self.resolve(segs, s.module), m.start())
                rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end() :]
            for m in PATH.finditer(rest):
                target = self.resolve(m.group(1).split("::"), s.module)
                if target not in found or m.start() < found[target]:
                    found[target] = m.start()
            edges[s.rel] = {
                self.files[t].rel: s.line_of(pos) for t, pos in found.items() if t is not None and t != name
            }
        return edges


ITEM = re.compile(r"\b(?:struct|enum|trait|fn|const|static|type|mod|union|macro_rules!)\s*([A-Za-z_][A-Za-z_0-9]*)")


def items(sources):
    """{module: the names it defines or imports}, for a reader checking that a path exists."""
    out = {}
    for s in sources:
        if s.binary:
            continue
        names = {m.group(1) for m in ITEM.finditer(s.code)}
        names |= {alias for m in USE.finditer(s.code) for _, alias in expand_use(m.group(1)) if alias}
        out["::".join(s.module)] = sorted(names)
    return out


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
    return sorted(comps)


def shortest_path(graph, start, goal, within):
    before, todo = {start: None}, deque([start])
    while todo:
        v = todo.popleft()
        if v == goal:
            path = []
            while v is not None:
                path.append(v)
                v = before[v]
            return path[::-1]
        for w in sorted(graph[v]):
            if w in within and w not in before:
                before[w] = v
                todo.append(w)
    return None


def chains(graph, group):
    """Cycles that together take every edge inside `group`: for each edge not yet taken, the edge
    and the shortest way back."""
    within, taken, out = set(group), set(), []
    for u in group:
        for v in sorted(graph[u]):
            if v not in within or (u, v) in taken:
                continue
            cycle = [u] + shortest_path(graph, v, u, within)
            taken.update(zip(cycle, cycle[1:]))
            out.append(cycle)
    return out


def circles(sources):
    graph = Crate(sources).graph()
    out = []
    for group in strongly_connected({k: set(v) for k, v in graph.items()}):
        out.append({
            "files": group,
            "chains": [[{"file": f, "line": graph[f][g]} for f, g in zip(c, c[1:])] + [{"file": c[-1], "line": None}]
                       for c in chains(graph, group)],
        })
    return out


def chain_text(chain):
    return " → ".join(f"{step['file']}:{step['line']}" if step["line"] else step["file"] for step in chain)


# ---------------------------------------------------------------- errors as strings, rows by hand


def result_strings(sources):
    """Each `Result<_, String>` (its place)."""
    rows = []
    for s in sources:
        for m in re.finditer(r"\bResult\s*<", s.code):
            args = s.code[m.end() - 1 : closing_angle(s.code, m.end() - 1)][1:-1]
            parts = split_top(args)
            if len(parts) == 2 and parts[1] in ("String", "std::string::String"):
                rows.append(f"{s.where}:{s.line_of(m.start())}")
    return rows


def closing_angle(code, i):
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "<":
            depth += 1
        elif code[j] == ">" and code[j - 1] != "-":
            depth -= 1
            if depth == 0:
                return j + 1
        elif code[j] in ";{":
            break
    return i + 1


def hand_try_gets(sources):
    """Each `.try_get(`/`.try_get::<…>(` call: a row read column by column."""
    return [f"{s.where}:{s.line_of(m.start())}" for s in sources
            for m in re.finditer(r"\.\s*try_get\s*(?:::\s*<[^()]*>\s*)?\(", s.code)]


# ---------------------------------------------------------------- the server's edges


def repo_in_handlers(sources):
    rows = []
    for s in sources:
        if s.path.name != "api.rs":
            continue
        text_lines = s.text.split("\n")
        for i, line in enumerate(s.code.split("\n"), 1):
            if re.search(r"\brepo::|::repo\b|\brepo\s*[,}]", line):
                rows.append(f"{s.where}:{i}: {text_lines[i - 1].strip()}")
    return rows


def bare_path_ids(sources):
    """Handlers that take a path's id as a bare `String` (`Path<String>`, `Path<(String, …)>`) and
    so parse it themselves, where `http::ids::IdPath` would parse it at the edge."""
    return [f"{s.where}:{s.line_of(m.start())}" for s in sources if s.module[-1:] in (["api"], ["relay"])
            for m in re.finditer(r"\bPath<\(?String", s.code)]


# A parameter that names a record by id: `run_id: &str`, `challenge: &str`, `id: &str`…
ID_NAME = r"([a-z_]*_id|id|run|challenge|environment|env|submission|agent|account|job|request)"
FEATURE_EDGES = {"api.rs", "relay.rs", "repo.rs", "mod.rs"}


def is_str_id(param):
    return re.match(ID_NAME + r"\s*:\s*&('[a-z]+\s+)?str$", param) is not None


def service_sources(sources):
    src = ROOT / "server" / "src"
    if (src / "service").is_dir():
        return [s for s in sources if s.module[:1] == ["service"]]
    # The one list of features (`feature_list.rs`; `lib.rs` held it before).
    listed = "".join((src / f).read_text() for f in ("lib.rs", "feature_list.rs") if (src / f).exists())
    features = set(re.findall(r"crate::([a-z_]+)::(?:[a-z_]+::)?FEATURE", listed)) - {"identity"}
    return [s for s in sources if len(s.module) == 2 and s.module[0] in features and s.path.name not in FEATURE_EDGES]


def str_ids(sources):
    total, pairs = 0, 0
    for s in service_sources(sources):
        for m in re.finditer(r"(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+[a-z_0-9]+(<[^>]*>)?\(([^)]*)\)", s.code, re.S):
            params = [x.strip() for x in m.group(5).split(",") if x.strip()]
            flags = [is_str_id(x) for x in params]
            if any(flags):
                total += 1
                if any(a and b for a, b in zip(flags, flags[1:])):
                    pairs += 1
    return {"functions": total, "adjacent_pairs": pairs}


# ---------------------------------------------------------------- Python

# The Python that ships or runs the arena, and its tests (demo environments and fixtures are data).
PYTHON_CODE = ("scripts", "public", "dev", "cluster/arena_cluster", "standin/sim")
PYTHON_TESTS = ("tests/cli", "cluster/tests")
PYTHON_SKIP = ("dev/demo",)


def python_files(roots):
    files = set()
    for root in roots:
        for p in (ROOT / root).rglob("*.py"):
            rel = p.relative_to(ROOT).as_posix()
            if not any(rel.startswith(skip + "/") for skip in PYTHON_SKIP):
                files.add(p)
    return sorted(files)


def statements(nodes):
    """Every statement, nested ones too (a function is one: expressions need no visit)."""
    for node in nodes:
        yield node
        for key in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, key, None)
            if isinstance(inner, list):
                yield from statements(inner)


def python_long_functions(roots):
    rows = []
    for p in python_files(roots):
        for node in statements(ast.parse(p.read_text(), str(p)).body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONG:
                    rows.append({"name": node.name, "where": f"{p.relative_to(ROOT).as_posix()}:{node.lineno}",
                                 "lines": length})
    return sorted(rows, key=lambda r: (-r["lines"], r["where"]))


# ---------------------------------------------------------------- migrations


def migrations():
    """How the two backends' folders pair: a reader pairs them by number, the runner applies them by
    number (so a file is never renamed). The migrations one backend has and the other has not (by
    name), the pairs that carry different numbers, and the numbers of one folder only."""
    folders = {b: sorted(f.name for f in (ROOT / "migrations" / b).glob("*.sql")) for b in ("sqlite", "postgres")}
    named = {b: {f.split("_", 1)[1]: f for f in files} for b, files in folders.items()}
    numbers = {b: {f.split("_", 1)[0] for f in files} for b, files in folders.items()}
    return {
        "only_in": {b: sorted(f for n, f in named[b].items() if n not in named[o])
                    for b, o in (("sqlite", "postgres"), ("postgres", "sqlite"))},
        "numbered_apart": sorted([named["sqlite"][n], named["postgres"][n]] for n in named["sqlite"]
                                 if n in named["postgres"] and named["sqlite"][n][:4] != named["postgres"][n][:4]),
        "number_without_twin": {b: sorted(numbers[b] - numbers[o]) for b, o in (("sqlite", "postgres"),
                                                                                  ("postgres", "sqlite"))},
    }


# ---------------------------------------------------------------- the workspace


def crate_dependencies():
    """{crate folder: the workspace's crates it depends on}, normal and dev apart; the frontend's
    page modules (`frontend/pages/*`) count as `frontend`."""
    import tomllib

    members = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["members"]
    folders = sorted({p for m in members for p in ROOT.glob(m) if (p / "Cargo.toml").is_file()})
    manifests = {f: tomllib.loads((f / "Cargo.toml").read_text()) for f in folders}
    top = {m["package"]["name"]: f.relative_to(ROOT).parts[0] for f, m in manifests.items()}
    out = {"normal": {}, "dev": {}}
    for f, m in manifests.items():
        crate = f.relative_to(ROOT).parts[0]
        for kind, table in (("normal", "dependencies"), ("dev", "dev-dependencies")):
            names = set(m.get(table, {}))
            for target in m.get("target", {}).values():
                names |= set(target.get(table, {}))
            ours = {top[n] for n in names if n in top} - {crate}
            out[kind].setdefault(crate, set()).update(ours)
    return {kind: {c: sorted(v) for c, v in sorted(deps.items())} for kind, deps in out.items()}


# ---------------------------------------------------------------- the served scripts

SERVED_SCRIPTS = ("check_task.py", "validation_gates.py", "arena_cli.py", "openenv_check.py")


def served_duplicates():
    tool = shutil.which("duplicates")
    if not tool:
        return None
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
    return {"sources": sources.relative_to(ROOT).as_posix(), "lines": sum(int(b) - int(a) + 1 for _, a, b, _ in rows),
            "runs": len(rows)}


# ---------------------------------------------------------------- the report


def measure(longest=10):
    figures = {"crates": {}}
    shorter = []
    for crate in CRATES:
        sources = read_crate(crate)
        rows = long_functions(sources)
        shorter += [r for r in rows if r["lines"] <= LONG][:longest]
        figures["crates"][crate] = {
            "files": len(sources),
            "production_lines": production_lines(sources),
            "circles": circles(sources),
            "long_functions": [r for r in rows if r["lines"] > LONG],
            "result_string": result_strings(sources),
            "try_get": hand_try_gets(sources),
            "items": items(sources),
        }
        if crate == "server":
            figures["handlers_naming_repo"] = repo_in_handlers(sources)
            figures["service_str_ids"] = str_ids(sources)
            figures["bare_path_ids"] = bare_path_ids(sources)
    figures["longest_within_limit"] = sorted(shorter, key=lambda r: (-r["lines"], r["where"]))[:longest]
    figures["dependencies"] = crate_dependencies()
    figures["python_long_functions"] = python_long_functions(PYTHON_CODE)
    figures["python_long_test_functions"] = python_long_functions(PYTHON_TESTS)
    figures["migrations"] = migrations()
    figures["served_duplicates"] = served_duplicates()
    return figures


def report(figures, n):
    crates = figures["crates"]
    rows = [r for c in CRATES for r in crates[c]["long_functions"]]
    rows.sort(key=lambda r: (-r["lines"], r["where"]))
    over = [r for r in rows if r["lines"] > LONG and not r["reason"]]
    excused = [r for r in rows if r["lines"] > LONG and r["reason"]]
    names = ", ".join(CRATES)
    print(f"functions over {LONG} lines ({names}; tests excluded), without a reason: {len(over)}")
    for r in over + figures["longest_within_limit"][: max(0, n - len(over))]:
        print(f"  {r['lines']:4d}  {r['name']}  {r['where']}")
    print(f"functions over {LONG} lines with a reason above them: {len(excused)}")
    for r in excused:
        print(f"  {r['lines']:4d}  {r['name']}  {r['where']}: {r['reason']}")
    too_long = [r for r in rows if r["lines"] > TOO_LONG]
    print(f"functions over {TOO_LONG} lines ({names}; tests excluded): {len(too_long)}")
    for r in too_long:
        print(f"  {r['lines']:4d}  {r['name']}  {r['where']}")
    for crate in CRATES:
        c = crates[crate]
        print(f"import circles in {crate} (groups of files that use each other; each chain's file with the line "
              f"that names the next): {len(c['circles'])}")
        for circle in c["circles"]:
            print(f"  {len(circle['files'])} files: {', '.join(circle['files'])}")
            for chain in circle["chains"]:
                print(f"    {chain_text(chain)}")
    for crate in CRATES:
        c = crates[crate]
        print(f"{crate}: {c['production_lines']} lines of production code in {c['files']} files, "
              f"Result<_, String>: {len(c['result_string'])}, hand try_get calls: {len(c['try_get'])}")
    print(f"handlers (api.rs) naming a feature's repo: {len(figures['handlers_naming_repo'])}")
    for r in figures["handlers_naming_repo"]:
        print("  " + r)
    print(f"handlers taking a path's id as a bare String: {len(figures['bare_path_ids'])}")
    for r in figures["bare_path_ids"]:
        print("  " + r)
    ids = figures["service_str_ids"]
    print(f"service functions taking an id as &str: {ids['functions']}, of which with two adjacent &str ids: "
          f"{ids['adjacent_pairs']}")
    for key, what in (("python_long_functions", "Python functions over 80 lines"),
                      ("python_long_test_functions", "Python test functions over 80 lines")):
        print(f"{what}: {len(figures[key])}")
        for r in figures[key]:
            print(f"  {r['lines']:4d}  {r['name']}  {r['where']}")
    def arrows(deps):
        return "; ".join(f"{c} → {', '.join(d)}" for c, d in deps.items() if d)

    deps = figures["dependencies"]
    print(f"crates depending on the workspace's: {arrows(deps['normal'])} (tests: {arrows(deps['dev'])})")
    m = figures["migrations"]
    for backend, files in m["only_in"].items():
        print(f"{backend} migrations without a twin of the same name: {len(files)}")
        for f in files:
            print(f"  {f}")
    print(f"migrations twinned by name under different numbers (sqlite, postgres): {len(m['numbered_apart'])}")
    for pair in m["numbered_apart"]:
        print(f"  {pair[0]}  {pair[1]}")
    for backend, missing in m["number_without_twin"].items():
        print(f"numbers only {backend} uses: {', '.join(missing) or 'none'}")
    d = figures["served_duplicates"]
    if d is None:
        print("lines shared between the served scripts: not measured (no `duplicates` command here)")
    else:
        print(f"lines shared between the served scripts' sources ({d['sources']}/): {d['lines']} in {d['runs']} runs")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--longest", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="print every figure as one JSON object")
    a = ap.parse_args()
    measured = measure(a.longest)
    if a.json:
        print(json.dumps(measured, indent=1, ensure_ascii=False))
    else:
        report(measured, a.longest)
