//! Python verifiers are parsed, never imported or run: a tokenizer (strings in every quoting form,
//! numbers, names, operators, comments, bracket-aware logical lines) and a reading of what the
//! verifier does with them: which paths it opens, which output fields it reads (`x["f"]`,
//! `x.get("f")`), which literal values its assertions compare, whether its assertions only check
//! that paths exist, and whether it downloads.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Name(String),
    Str(String),
    Num(String),
    Op(char),
    Newline,
}

/// At most this many tokens are read from one file.
const MAX_TOKENS: usize = 200_000;

pub fn tokenize(src: &str) -> Vec<Tok> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0usize;
    while i < chars.len() && out.len() < MAX_TOKENS {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '\n' => {
                if depth == 0 && out.last() != Some(&Tok::Newline) {
                    out.push(Tok::Newline);
                }
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '"' | '\'' => {
                let (s, next) = string(&chars, i);
                out.push(Tok::Str(s));
                i = next;
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let is_prefix = word.len() <= 2 && word.chars().all(|c| "rRbBuUfF".contains(c));
                if is_prefix && matches!(chars.get(i), Some('"') | Some('\'')) {
                    let (s, next) = string(&chars, i);
                    out.push(Tok::Str(s));
                    i = next;
                } else {
                    out.push(Tok::Name(word));
                }
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
                {
                    // An exponent's sign belongs to the number: `1e-6`.
                    if matches!(chars[i], 'e' | 'E') && matches!(chars.get(i + 1), Some('+') | Some('-')) {
                        i += 1;
                    }
                    i += 1;
                }
                out.push(Tok::Num(chars[start..i].iter().collect::<String>().replace('_', "")));
            }
            _ => {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push(Tok::Op(c));
                i += 1;
            }
        }
    }
    if out.last() != Some(&Tok::Newline) {
        out.push(Tok::Newline);
    }
    out
}

/// Reads a string literal starting at `i` (a quote); returns its text and the index after it.
fn string(chars: &[char], i: usize) -> (String, usize) {
    let q = chars[i];
    let triple = chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q);
    let mut j = if triple { i + 3 } else { i + 1 };
    let mut s = String::new();
    while j < chars.len() {
        let c = chars[j];
        if c == '\\' && j + 1 < chars.len() {
            s.push(chars[j + 1]);
            j += 2;
            continue;
        }
        if triple {
            if c == q && chars.get(j + 1) == Some(&q) && chars.get(j + 2) == Some(&q) {
                return (s, j + 3);
            }
        } else if c == q {
            return (s, j + 1);
        } else if c == '\n' {
            return (s, j);
        }
        s.push(c);
        j += 1;
    }
    (s, j)
}

/// What a verifier does, as far as reading it can tell.
#[derive(Debug, Default, Clone)]
pub struct Verifier {
    /// String literals that look like file paths.
    pub paths: BTreeSet<String>,
    /// Keys read with `x["key"]` or `x.get("key")`.
    pub fields: BTreeSet<String>,
    /// Literal values its assertions compare with.
    pub compared: BTreeSet<String>,
    pub assertions: usize,
    /// Assertions that only check a path exists.
    pub existence_assertions: usize,
    pub downloads: bool,
}

const EXISTS: &[&str] = &["exists", "is_file", "isfile", "isdir", "is_dir", "access"];
/// Names that fetch from the network (`urllib` alone is mostly `urllib.parse`).
const NET: &[&str] = &["requests", "urlopen", "httpx", "urlretrieve", "wget", "aiohttp"];
/// At most this many fields, values and paths are kept per verifier: enough for real verifiers,
/// and it bounds the comparisons a hostile one can cause.
pub const MAX_ITEMS: usize = 256;

pub fn looks_like_path(s: &str) -> bool {
    if s.is_empty() || s.len() > 300 || s.contains(char::is_whitespace) || s.contains("://") {
        return false;
    }
    let base = s.rsplit('/').next().unwrap_or(s);
    let ext = base.rsplit_once('.').map(|(_, e)| e);
    s.starts_with('/')
        || ext.is_some_and(|e| (1..=5).contains(&e.len()) && e.chars().all(|c| c.is_ascii_alphanumeric()))
}

pub fn analyse(src: &str) -> Verifier {
    let toks = tokenize(src);
    let mut v = Verifier::default();
    for (n, t) in toks.iter().enumerate() {
        match t {
            Tok::Str(s) => {
                if looks_like_path(s) && v.paths.len() < MAX_ITEMS {
                    v.paths.insert(s.clone());
                }
                if s.starts_with("http://") || s.starts_with("https://") || s.contains("pip install") {
                    v.downloads = true;
                }
                let prev = n.checked_sub(1).and_then(|p| toks.get(p));
                let next = toks.get(n + 1);
                let subscript = prev == Some(&Tok::Op('[')) && next == Some(&Tok::Op(']'));
                let get = n >= 3
                    && toks[n - 1] == Tok::Op('(')
                    && toks[n - 2] == Tok::Name("get".into())
                    && toks[n - 3] == Tok::Op('.');
                if (subscript || get) && s.len() <= 80 && v.fields.len() < MAX_ITEMS {
                    v.fields.insert(s.clone());
                }
            }
            Tok::Name(w) if NET.contains(&w.as_str()) => v.downloads = true,
            _ => {}
        }
    }
    for line in toks.split(|t| *t == Tok::Newline) {
        let is_assert = matches!(line.first(), Some(Tok::Name(w)) if w == "assert")
            || line.windows(3).any(|w| {
                matches!(&w[0], Tok::Name(s) if s == "self")
                    && w[1] == Tok::Op('.')
                    && matches!(&w[2], Tok::Name(s) if s.starts_with("assert"))
            });
        if !is_assert {
            continue;
        }
        v.assertions += 1;
        if line.iter().any(|t| matches!(t, Tok::Name(w) if EXISTS.contains(&w.as_str()))) {
            v.existence_assertions += 1;
        }
        for (n, t) in line.iter().enumerate() {
            let key = n > 0 && line[n - 1] == Tok::Op('[') && line.get(n + 1) == Some(&Tok::Op(']'));
            match t {
                _ if v.compared.len() >= MAX_ITEMS => {}
                Tok::Str(s) if !key && !looks_like_path(s) && !s.is_empty() && s.len() <= 200 => {
                    v.compared.insert(s.clone());
                }
                Tok::Num(x) if !key => {
                    v.compared.insert(x.clone());
                }
                _ => {}
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
import json, os
# a comment with "quotes" and ['brackets']
EXPECTED = json.load(open("/app/expected_output.json"))

def test_total():
    report = json.load(open('/app/output/report.json'))
    assert report["total"] == 1234.5, f"got {report['total']}"
    assert report.get("currency") == "EUR"
    assert (report["rows"]
            == 12)

def test_exists():
    assert os.path.exists("/app/output/report.json")
    s = """triple "quoted" text
    across lines"""
"#;

    #[test]
    fn reads_paths_fields_and_compared_values() {
        let v = analyse(SRC);
        assert!(v.paths.contains("/app/expected_output.json"));
        assert!(v.paths.contains("/app/output/report.json"));
        assert_eq!(v.fields.iter().map(String::as_str).collect::<Vec<_>>(), ["currency", "rows", "total"]);
        assert!(v.compared.contains("1234.5") && v.compared.contains("EUR") && v.compared.contains("12"));
        assert_eq!(v.assertions, 4);
        assert_eq!(v.existence_assertions, 1);
        assert!(!v.downloads);
    }

    #[test]
    fn survives_any_input() {
        for src in ["\"unterminated", "'''", "r'\\", "x = (\n", "\u{0}\u{ffff}", "0x_", "...", "\\"] {
            let _ = analyse(src);
        }
        assert!(analyse("import requests\nrequests.get(u)\n").downloads);
        assert!(!analyse("from urllib.parse import urljoin\n").downloads);
        let v = analyse("def t():\n    assert abs(x - 0.5) < 1e-6\n");
        assert!(v.compared.contains("1e-6"), "{:?}", v.compared);
        let many: String = (0..10_000).map(|i| format!("x[\"k{i}\"]\n")).collect();
        assert_eq!(analyse(&many).fields.len(), MAX_ITEMS);
    }
}
