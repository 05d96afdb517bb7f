//! `environment/Dockerfile`: `dockerfile::instructions` (continuations, comments), `copies`
//! (shell and JSON forms, flags), `written_files` (redirections, `tee`), `remote_adds` and
//! `starts_with_from`.
#![no_main]

use domain::gates::dockerfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let ins = dockerfile::instructions(&text);
    assert!(ins.len() <= 2_000, "more instructions than the bound: {}", ins.len());
    for i in &ins {
        assert!(i.line >= 1);
        assert_eq!(i.keyword, i.keyword.to_ascii_uppercase());
    }
    for pair in ins.windows(2) {
        assert!(pair[0].line < pair[1].line, "instruction lines out of order: {pair:?}");
    }
    let copies = dockerfile::copies(&ins);
    for c in &copies {
        assert!(!c.sources.is_empty());
    }
    let _ = dockerfile::remote_adds(&copies);
    let _ = dockerfile::written_files(&ins);
    let _ = dockerfile::starts_with_from(&text);
});
