"""docs/ARCHITECTURE.md held to the code: the figures it states are the ones dev/code_metrics.py
measures (run with --json), and every crate path, type and file it names exists. Reads the
sources only: no server, no build."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
CRATES = ("domain", "server", "standin", "app")
# Crates of crates.io the document names a path of (`anyhow::Result`, `#[utoipa::path]`).
EXTERNAL = {"anyhow", "utoipa"}
# Files the document names that are not in the repository: written at a run's launch.
RUNTIME_FILES = {"arena.json"}


@pytest.fixture(scope="module")
def metrics():
    done = subprocess.run([sys.executable, str(ROOT / "dev" / "code_metrics.py"), "--json"], capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def prose():
    """The document without its fenced blocks (a directory listing, the board's router)."""
    return re.sub(r"```.*?```", "", DOC, flags=re.S)


def code_spans():
    return re.findall(r"`([^`\n]+)`", prose())


def table_rows(header):
    """The rows of the table whose header row starts with `header`, as lists of cells."""
    lines = DOC.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_circles_it_lists_are_the_ones_measured(metrics):
    rows = {cells[0].strip("`"): cells for cells in table_rows("| crate | circles |")}
    assert set(rows) == set(CRATES)
    for crate in CRATES:
        _, count, files = rows[crate]
        circles = metrics["crates"][crate]["circles"]
        assert int(count) == len(circles), crate
        # One group of files a circle, `;` between groups.
        listed = sorted(sorted(re.findall(r"`([^`]+)`", group)) for group in files.split(";") if group.strip())
        assert listed == sorted(c["files"] for c in circles), crate


def test_the_dependencies_it_draws_are_the_workspaces(metrics):
    drawn = set()
    for span in code_spans():
        if "→" in span:
            chain = [part.strip() for part in span.split("→")]
            drawn |= set(zip(chain, chain[1:]))
    real = {(crate, dep) for crate, deps in metrics["dependencies"]["normal"].items() for dep in deps}
    # Each arrow is a dependency, and the chains reach what the crates reach (`server → app →
    # domain` draws server's own dependency on domain too).
    assert drawn <= real
    assert closure(drawn) == closure(real)
    assert "nothing\ndepends on `server`" in DOC or "nothing depends on `server`" in DOC
    assert not any("server" in deps for deps in metrics["dependencies"]["normal"].values())


def closure(edges):
    reach = set(edges)
    while True:
        more = {(a, d) for a, b in reach for c, d in reach if b == c} - reach
        if not more:
            return reach
        reach |= more


def test_the_handlers_name_no_repository(metrics):
    stated = re.search(r"handlers naming a repository \((\d+)\)", DOC.replace("\n", " "))
    assert stated and int(stated.group(1)) == len(metrics["handlers_naming_repo"])


def test_the_migrations_pair_as_it_says(metrics):
    m = metrics["migrations"]
    text = " ".join(DOC.split())
    only = re.search(r"PostgreSQL's `(\d{4}_\w+\.sql)`, its change triggers, has no SQLite twin", text)
    assert only and m["only_in"] == {"sqlite": [], "postgres": [only.group(1)]}
    shift = re.search(r"SQLite's (\d+) to (\d+) are PostgreSQL's (\d+) to (\d+)", text)
    assert shift, "the document says which numbers differ"
    apart = m["numbered_apart"]
    assert [p[0][:4] for p in (apart[0], apart[-1])] == [shift.group(1), shift.group(2)]
    assert [p[1][:4] for p in (apart[0], apart[-1])] == [shift.group(3), shift.group(4)]
    assert all(int(p[1][:4]) - int(p[0][:4]) == 1 for p in apart)


def resolves(items, crate, segs):
    """Whether `segs` names a module of `crate`, or an item a module defines or imports."""
    modules = items[crate]
    for k in range(len(segs), -1, -1):
        module = "::".join(segs[:k])
        if module in modules:
            rest = segs[k:]
            return not rest or rest[0] in modules[module]
    return False


def test_every_crate_path_it_names_exists(metrics):
    items = {crate: metrics["crates"][crate]["items"] for crate in CRATES}
    types = {name for crate in CRATES for names in items[crate].values() for name in names}
    missing = []
    for span in code_spans():
        for path in re.findall(r"(?<![\w:$])([A-Za-z_]\w*(?:::[A-Za-z_]\w*)+)", span):
            segs = path.split("::")
            if segs[0] in EXTERNAL or "NAME" in segs:
                continue
            if segs[0][0].isupper():  # `Type::function`: the type
                found = segs[0] in types
            elif segs[0] in CRATES:
                found = resolves(items, segs[0], segs[1:])
            elif segs[0] == "crate":
                found = any(resolves(items, crate, segs[1:]) for crate in CRATES)
            else:  # a path inside a crate, most often the server's
                found = any(resolves(items, crate, segs) for crate in CRATES)
            if not found:
                missing.append(path)
    assert not missing, f"paths ARCHITECTURE.md names that the code has not: {missing}"


def test_every_type_it_names_exists(metrics):
    names = {n for crate in CRATES for module in metrics["crates"][crate]["items"].values() for n in module}
    named = {span for span in code_spans() if re.fullmatch(r"[A-Z][a-z]\w*", span)}
    assert named, "the document names types"
    assert not named - names, f"types ARCHITECTURE.md names that the code has not: {sorted(named - names)}"


def test_the_boards_router_is_the_one_shown(metrics):
    block = re.search(r"```rust\n(.*?)```", DOC, re.S).group(1)
    handlers = re.findall(r"api::(\w+)", block)
    assert handlers and set(handlers) <= set(metrics["crates"]["server"]["items"]["board::api"])
    source = (ROOT / "server" / "src" / "board" / "mod.rs").read_text()
    assert re.findall(r"api::(\w+)", source) == handlers


def test_every_file_it_names_exists():
    crates = [ROOT / c / "src" for c in CRATES]
    bases = [ROOT, *(ROOT / c for c in CRATES), ROOT / "cluster" / "arena_cluster", *(ROOT / "migrations").iterdir(),
             *crates]
    bases += [d for src in crates for d in src.rglob("*") if d.is_dir()]
    missing = []
    for span in code_spans():
        if not re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", span) or "NAME" in span:
            continue
        if not (span.endswith("/") or re.search(r"\.(rs|py|toml|sql|md|json)$", span)):
            continue
        if span not in RUNTIME_FILES and not any((base / span).exists() for base in bases):
            missing.append(span)
    assert not missing, f"files ARCHITECTURE.md names that the repository has not: {missing}"


def test_the_ports_table_lists_every_field_of_deps():
    source = (ROOT / "server" / "src" / "ports" / "mod.rs").read_text()
    body = re.search(r"pub struct Deps \{(.*?)\n\}", source, re.S).group(1)
    fields = set(re.findall(r"^\s*pub (\w+):", body, re.M))
    listed = {name for cells in table_rows("| field | trait |") for name in re.findall(r"`(\w+)`", cells[0])}
    assert listed == fields
