//! Stamps the binary with its build time. The commit comes from `ARENA_BUILD_COMMIT` (dev/build
//! sets it from git), read with `option_env!` so cargo rebuilds when it changes.
fn main() {
    println!("cargo:rerun-if-env-changed=ARENA_BUILD_COMMIT");
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    println!("cargo:rustc-env=ARENA_BUILD_EPOCH={now}");
}
