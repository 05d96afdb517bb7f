//! Digests as the arena writes them: lowercase hex, one helper for every crate.

use sha2::{Digest, Sha256};

/// `bytes` in lowercase hex.
pub fn hex(bytes: impl AsRef<[u8]>) -> String {
    ::hex::encode(bytes)
}

/// SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    ::hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_digests() {
        assert_eq!(super::hex([0x00, 0xab, 0xff]), "00abff");
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
