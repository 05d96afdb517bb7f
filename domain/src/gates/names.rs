//! File names that look like answers or grading data. Names are split into words on `_ - . /` and
//! case changes are ignored, so `expected_output.json`, `ground-truth.csv` and `ANSWER.txt` match.

const ANSWER_WORDS: &[&str] = &[
    "answer",
    "answers",
    "answerkey",
    "expected",
    "solution",
    "solutions",
    "truth",
    "groundtruth",
    "gold",
    "golden",
    "oracle",
    "label",
    "labels",
    "reference",
    "key",
];

/// Words that only count together with another (a `key` alone is usually a config key file).
const WEAK: &[&str] = &["key", "reference"];

fn words(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_ascii_lowercase())
}

/// The file's base name looks like an answer key (truth, oracle, expected, label, answer,
/// solution…).
pub fn answer_like(path: &str) -> bool {
    let base = basename(path);
    let stem = base.rsplit_once('.').map_or(base, |(s, _)| s);
    let ws: Vec<String> = words(stem).collect();
    let strong = ws.iter().any(|w| ANSWER_WORDS.contains(&w.as_str()) && !WEAK.contains(&w.as_str()));
    let joined = ws.concat();
    strong || joined.contains("answerkey") || joined.contains("groundtruth")
}

pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Bytecode, caches and version-control data that should never be in an image.
pub fn junk(path: &str) -> bool {
    path.split('/').any(|c| {
        matches!(
            c,
            "__pycache__" | ".git" | ".pytest_cache" | ".mypy_cache" | ".ipynb_checkpoints" | ".ruff_cache"
        )
    }) || path.ends_with(".pyc")
        || path.ends_with(".pyo")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_answer_keys() {
        for yes in [
            "expected_output.json",
            "data/answer.json",
            "ground-truth.csv",
            "LABELS.txt",
            "solution_notes.txt",
            "answer_key.md",
        ] {
            assert!(answer_like(yes), "{yes}");
        }
        for no in ["sales.csv", "report.json", "keys.txt", "api_key.txt", "expectation.md", "Dockerfile"] {
            assert!(!answer_like(no), "{no}");
        }
        assert!(junk("environment/__pycache__/x.cpython-311.pyc"));
        assert!(junk("environment/.git/HEAD"));
        assert!(!junk("environment/data/git.txt"));
    }
}
