//! Python verifiers (`verifier/*.py`, `tests/*.py`): `python::tokenize` and `python::analyse`
//! (paths opened, fields read, compared literals, assertions, downloads).
#![no_main]

use domain::gates::python;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let toks = python::tokenize(&src);
    assert!(toks.len() <= 200_000);
    let v = python::analyse(&src);
    assert!(v.existence_assertions <= v.assertions);
    for p in &v.paths {
        assert!(python::looks_like_path(p));
    }
});
