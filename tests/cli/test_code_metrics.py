"""dev/code_metrics.py reads Rust as the figures need: test code cut where it stands (production
code after a test module still measured), braces inside strings, chars and comments not counted,
and a path resolved to the file that defines what it names."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "dev" / "code_metrics.py")
metrics = importlib.util.module_from_spec(spec)
spec.loader.exec_module(metrics)

SOURCE = r'''
pub fn before() {}

#[cfg(test)]
mod tests;

/// A brace in a string, a char and a comment: "}" '{' /* } */
pub fn tricky() -> &'static str {
    let _ = '{';
    // }
    r#"}}"#
}

#[cfg(test)]
mod inline {
    fn helper() { let _ = "}"; }
}

#[cfg(test)]
pub(crate) fn shipped() -> Vec<u8> {
    vec![]
}

#[cfg(all(test, feature = "ssr"))]
use super::*;

#[cfg(any(test, feature = "hydrate"))]
pub fn kept() {}

#[cfg(test)]
mod cases;

pub fn after() {
    let x = 1;
}
'''


def production(text):
    code = metrics.mask(text)
    items = metrics.test_items(code)
    spans = [(a, b) for a, b, _ in items]
    source = metrics.Source("domain", ROOT / "domain" / "src" / "x.rs", ["x"], metrics.blank_spans(text, spans),
                            metrics.blank_spans(code, spans))
    return source, [declared for _, _, declared in items if declared]


def test_test_items_are_cut_where_they_stand():
    source, declared = production(SOURCE)
    found = {name: (line, length) for name, line, length, _ in metrics.functions(source)}
    assert set(found) == {"before", "tricky", "kept", "after"}
    assert found["tricky"][1] == 5
    assert found["after"][1] == 3
    # Line numbers still point into the file.
    assert SOURCE.split("\n")[found["after"][0] - 1] == "pub fn after() {"
    # `mod tests;` and `mod cases;` bring in test files.
    assert declared == ["tests", "cases"]


def test_a_use_tree_names_every_path():
    assert metrics.expand_use("a::{b, c::{d as e, self}, f::*}") == [
        (["a", "b"], "b"), (["a", "c", "d"], "e"), (["a", "c"], "c"), (["a", "f"], None)]


def test_a_re_export_leads_to_the_file_that_defines_the_name():
    def source(module, text):
        path = ROOT / "domain" / "src" / (("/".join(module) or "lib") + ".rs")
        return metrics.Source("domain", path, module, text, metrics.mask(text))

    crate = metrics.Crate([
        source([], "pub mod registry;\npub mod views;\npub use registry::Baseline;\n"),
        source(["registry"], "mod challenge;\npub use challenge::Baseline;\n"),
        source(["registry", "challenge"], "pub struct Baseline;\n"),
        source(["views"], "use crate::registry::Baseline;\nfn f() -> crate::Baseline { todo!() }\n"),
    ])
    graph = crate.graph()
    assert set(graph["views.rs"]) == {"registry/challenge.rs"}
