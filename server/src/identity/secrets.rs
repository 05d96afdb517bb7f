//! Random secrets and what is kept of them: helpers every part of the server uses, apart from the
//! identity code that reads the server's state.

/// A random secret of 32 bytes, base64url without padding.
pub fn random_secret() -> String {
    use base64::Engine;
    let mut buf = [0u8; 32];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// `bytes` random bytes in hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS has randomness");
    domain::digest::hex(buf)
}

/// SHA-256 of a secret, in hex: what is kept of it.
pub fn sha256_hex(secret: &str) -> String {
    domain::digest::sha256_hex(secret)
}

/// Compares in full whatever differs first, so the time says nothing about a secret.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
