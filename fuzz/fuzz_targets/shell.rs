//! Shell scripts (`verifier/test.sh`, `oracle/solve.sh`): `shell::is_noop`, `shell::downloads`
//! and `shell::reward_always_one`.
#![no_main]

use domain::gates::shell;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let script = String::from_utf8_lossy(data);
    let _ = shell::is_noop(&script);
    let _ = shell::downloads(&script);
    let _ = shell::reward_always_one(&script);
});
