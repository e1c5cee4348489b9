//! An API key's material: its format, its stored digest and its comparison. A leaf below both
//! the key records ([`crate::keys`], which re-exports it) and tenants (a tenant's first key,
//! authentication), so that tenants use it without depending on those records, which depend on
//! tenants (the tenant-row hold).

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of tenant API keys.
pub const TENANT_KEY_PREFIX: &str = "bw_";

/// A fresh tenant API key: `bw_` + 32 URL-safe base64 characters (24 random bytes).
pub fn generate_api_key() -> String {
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!(
        "{TENANT_KEY_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The stored digest of a key (32 bytes of SHA-256).
pub fn hash_key(key: &str) -> Vec<u8> {
    Sha256::digest(key.as_bytes()).to_vec()
}

/// The non-secret prefix kept beside the digest to help a person tell keys apart (first 7
/// characters).
pub fn display_prefix(key: &str) -> String {
    key.chars().take(7).collect()
}

/// Compares a presented key with an expected one in constant time (by their digests).
pub fn keys_match(presented: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    hash_key(presented).ct_eq(&hash_key(expected)).into()
}

/// `last_used_at` is written at most once per this many seconds per key (so a busy key costs no
/// write per request); the value it shows is at most this old.
pub const LAST_USED_RESOLUTION_S: u32 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_prefixed_and_hash_to_32_bytes() {
        let a = generate_api_key();
        let b = generate_api_key();
        assert_ne!(a, b);
        assert!(a.starts_with(TENANT_KEY_PREFIX));
        assert_eq!(a.len(), 3 + 32);
        assert_eq!(hash_key(&a).len(), 32);
        assert_ne!(hash_key(&a), hash_key(&b));
        assert!(keys_match(&a, &a.clone()));
        assert!(!keys_match(&a, &b));
    }
}
