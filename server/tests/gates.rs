//! The hostile and broken collection corpus (`tests/fixtures/collections/`, one fixture per case,
//! `EXPECTED.json` saying what each must produce), run through the one implementation of the
//! structure check and static gates, against our own held-out suites: `sealed-suite` (sealed,
//! evaluated) and `public-bench` (a public benchmark with template text). Also golden files of the
//! JSON `validate` returns (`UPDATE_GOLDEN=1` rewrites them), and the generated cases (2 MB and 50 MB files,
//! `..` path, 201 tasks).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use domain::collection::{check, Contents, Entry, Report};
use domain::gates::fingerprint::HeldOut;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn heldout() -> HeldOut {
    let fixtures = root().join("tests/fixtures/heldout");
    let sealed =
        server::local::fingerprint_dir(&fixtures.join("sealed-suite"), "openenv-heldout", true).unwrap();
    let public =
        server::local::fingerprint_dir(&fixtures.join("public-bench"), "public-bench", false).unwrap();
    HeldOut { suites: vec![(Arc::new(sealed), true), (Arc::new(public), false)] }
}

fn read(case: &str) -> (Vec<Entry>, Contents) {
    server::local::read_dir(&root().join("tests/fixtures/collections").join(case)).unwrap()
}

fn codes<'a>(items: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    items.map(str::to_string).collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

fn compare(case: &str, expected: &Value, report: &Report) {
    assert_eq!(report.valid, expected["valid"].as_bool().unwrap(), "{case}: valid\n{report:#?}");
    assert_eq!(
        codes(report.errors.iter().map(|e| e.code.as_str())),
        strings(&expected["errors"]),
        "{case}: errors {:#?}",
        report.errors
    );
    assert_eq!(
        codes(report.warnings.iter().map(|w| w.code.as_str())),
        strings(&expected["warnings"]),
        "{case}: warnings {:#?}",
        report.warnings
    );
    let got: BTreeSet<(String, String, String)> = report
        .quality_gates
        .static_
        .findings
        .iter()
        .map(|f| {
            (
                f.task.clone(),
                f.code.clone(),
                serde_json::to_value(f.severity).unwrap().as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String, String)> = expected["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["task"].as_str().unwrap().into(),
                f["code"].as_str().unwrap().into(),
                f["severity"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(got, want, "{case}: findings {:#?}", report.quality_gates.static_.findings);
    let s = &report.quality_gates.static_.summary;
    assert_eq!(s.blocked + s.rejected + s.eligible, s.tasks, "{case}: summary {s:?}");
    assert_eq!(report.eligible_tasks, s.eligible);
}

#[test]
fn every_fixture_gets_its_findings() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/collections/EXPECTED.json")).unwrap(),
    )
    .unwrap();
    let held = heldout();
    let mut ran = 0;
    for (case, want) in expected.as_object().unwrap() {
        if want["generated"].as_bool() == Some(true) {
            continue;
        }
        let (listing, contents) = read(case);
        let report = check(&listing, &contents, &held);
        compare(case, want, &report);
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} fixtures ran");
}

#[test]
fn generated_hostile_cases() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/collections/EXPECTED.json")).unwrap(),
    )
    .unwrap();
    let held = heldout();

    // A 2 MB verifier: listed, never read. At 50 MB, the collection itself is over its bound.
    for (case, size) in [("big-file", 2 << 20), ("collection-too-large", 50 << 20)] {
        let (mut listing, mut contents) = read("good");
        let path =
            listing.iter().find(|e| e.path.ends_with("verifier/test_outputs.py")).unwrap().path.clone();
        let big = vec![b'#'; size];
        let (big_listing, _) =
            domain::collection::listing::from_files([(path.as_str(), big.as_slice(), false)]);
        listing.retain(|e| e.path != path);
        listing.push(big_listing[0].clone());
        contents.remove(&path);
        compare(case, &expected[case], &check(&listing, &contents, &held));
    }

    // `..` in a path.
    let (mut listing, contents) = read("good");
    let mut escape = listing[0].clone();
    escape.path = "envs/x/../../escape.txt".into();
    listing.push(escape);
    compare("dotdot-path", &expected["dotdot-path"], &check(&listing, &contents, &held));

    // 201 tasks.
    let (listing, contents) = read("good");
    let task_dir = listing
        .iter()
        .find(|e| e.path.starts_with("envs/"))
        .unwrap()
        .path
        .split('/')
        .nth(1)
        .unwrap()
        .to_string();
    let prefix = format!("envs/{task_dir}/");
    let mut many = vec![listing.iter().find(|e| e.path == "submission.yaml").unwrap().clone()];
    for i in 0..201 {
        for e in listing.iter().filter(|e| e.path.starts_with(&prefix)) {
            many.push(Entry { path: e.path.replacen(&prefix, &format!("envs/t{i:03}/"), 1), ..e.clone() });
        }
    }
    compare("too-many-tasks", &expected["too-many-tasks"], &check(&many, &contents, &held));
}

#[test]
fn identities_follow_content_not_location() {
    let (listing, contents) = read("good");
    let report = check(&listing, &contents, &HeldOut::none());
    let ids = &report.quality_gates.static_.task_identity;
    assert_eq!(ids.len(), report.tasks);
    assert!(ids.values().all(|h| h.starts_with("sha256:") && h.len() == 71));
    // The same task under another entry path has the same identity.
    let moved: Vec<Entry> = listing.iter().map(|e| Entry { path: e.path.clone(), ..e.clone() }).collect();
    assert_eq!(check(&moved, &contents, &HeldOut::none()).quality_gates.static_.task_identity, *ids);
}

/// The JSON `validate` carries (without the source and fetch figures, which depend on the host).
#[test]
fn golden_reports() {
    let held = heldout();
    for case in [
        "good",
        "good-harbor",
        "dockerfile-copies-oracle",
        "verifier-reads-answer-key",
        "heldout-near-copy",
        "credit-missing",
    ] {
        let (listing, contents) = read(case);
        let report = check(&listing, &contents, &held);
        let json = serde_json::to_string_pretty(&report).unwrap() + "\n";
        let golden = root().join("tests/golden").join(format!("validate-{case}.json"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &json).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_else(|_| {
            panic!("{} is missing: run `UPDATE_GOLDEN=1 cargo test -p server --test gates`", golden.display())
        });
        assert_eq!(
            json, want,
            "{case}: the report changed; if on purpose, rerun with UPDATE_GOLDEN=1 and review the diff"
        );
    }
}

#[test]
fn fingerprints_set_template_text_apart_and_publish_no_text() {
    let held = heldout();
    let (public, _) = &held.suites[1];
    assert!(!public.template_blobs.is_empty(), "the shared Dockerfile and test.sh are template files");
    assert!(!public.template_shingles.is_empty(), "the shared boilerplate sentence is template text");
    let json = serde_json::to_string(&held.suites[0].0).unwrap();
    let (listing, contents) =
        server::local::read_dir(&root().join("tests/fixtures/heldout/sealed-suite")).unwrap();
    let task_md = listing.iter().find(|e| e.path.ends_with("task.md")).unwrap();
    let text = String::from_utf8(contents[&task_md.path].bytes().to_vec()).unwrap();
    let prompt_words: Vec<&str> =
        text.split("## prompt").nth(1).unwrap_or(&text).split_whitespace().take(6).collect();
    assert!(!json.contains(&prompt_words.join(" ")), "a fingerprint must not carry prompt text");
}
