//! A message a run's job sends over the relay (`runs::follow::RelayMessage`), parsed and checked as
//! the relay does, then its stage read; also any line of a job's log through the step mapping.
#![no_main]

use domain::runs::follow::{stage_of_log_line, RelayMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = serde_json::from_slice::<RelayMessage>(data) {
        if m.check().is_ok() {
            let _ = m.stage();
        }
    }
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(stage) = stage_of_log_line(line) {
            assert!(domain::runs::STAGES.contains(&stage), "{stage}");
        }
    }
});
