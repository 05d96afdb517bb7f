//! A run's result files as `result collect` and `arena verify-run` read them: an
//! `eval_task_outcomes.json` and a `score.json` (the input split at its first `\n\0\n`) against the
//! local-demo fixture's bundle, through `results::verify` as a run and as a baseline measurement.
//! Whatever the files hold, the answer is a result or a refusal; a result's numbers are finite.
#![no_main]

use std::collections::BTreeMap;

use domain::results::{self, RunEvidence, Verified};
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = include_str!("../../tests/fixtures/pipeline/local-demo/config.toml");

fuzz_target!(|data: &[u8]| {
    let split = data.windows(3).position(|w| w == b"\n\0\n");
    let (outcomes, report) = match split {
        Some(i) => (&data[..i], &data[i + 3..]),
        None => (data, &b""[..]),
    };
    let tasks: String = (1..=12).map(|i| format!("local-heldout-{i:02}\n")).collect();
    let evidence = RunEvidence {
        config_toml: CONFIG.to_string(),
        task_lists: BTreeMap::from([("task-lists/eval_suite-local-heldout.txt".to_string(), tasks)]),
        outcomes: outcomes.to_vec(),
        report: report.to_vec(),
        ..Default::default()
    };
    for baseline in [false, true] {
        if let Ok(Verified::Scored { measured, .. }) = results::verify("run-fuzz", baseline, &evidence) {
            assert!(measured.delta_pp.is_finite(), "{measured:?}");
            assert!(measured.stderr_pp.is_none_or(f64::is_finite), "{measured:?}");
        }
    }
});
