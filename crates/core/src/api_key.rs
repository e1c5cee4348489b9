//! An API key's material: its format, its stored digest and its comparison. A leaf below both
//! the key records ([`crate::keys`], which re-exports it) and tenants (a tenant's first key,
//! authentication), so that tenants use it without depending on those records, which depend on
//! tenants (the tenant-row hold).

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of tenant API keys.
pub const TENANT_KEY_PREFIX: &str = "bw_";

/// Random characters of a tenant API key (24 random bytes in URL-safe base64).
pub const KEY_RANDOM_CHARS: usize = 32;

/// The cell a deployment's node belongs to (`cell` in the configuration; docs/cells.md): an
/// independent Postgres (in production a Patroni cluster) with its own nodes and tenants.
/// 1 to 8 characters `a`–`z`, `0`–`9`. Every credential a node of a cell mints carries it
/// ([`generate_api_key`], [`crate::portal::generate_token`]), so a router in front of the cells
/// (deploy/cells/) sends each request to the cell that holds its tenant by the credential's
/// visible prefix alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cell(String);

impl Cell {
    /// Most characters of a cell id.
    pub(crate) const MAX_LEN: usize = 8;

    /// The cell `id`; an error saying the rule when it breaks it.
    pub fn new(id: &str) -> Result<Self, String> {
        let ok = (1..=Self::MAX_LEN).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if ok {
            Ok(Self(id.to_string()))
        } else {
            Err(format!(
                "a cell id is 1 to {} characters a-z and 0-9, not {id:?}",
                Self::MAX_LEN
            ))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `prefix` + `<cell>_` (when `cell` is given) + `random_bytes` random bytes in URL-safe base64:
/// the shape of every credential ([`generate_api_key`], [`crate::portal::generate_token`]).
pub(crate) fn generate_credential(
    prefix: &str,
    cell: Option<&Cell>,
    random_bytes: usize,
) -> String {
    let mut bytes = vec![0u8; random_bytes];
    rand::thread_rng().fill_bytes(&mut bytes);
    let cell = cell.map(|c| format!("{c}_")).unwrap_or_default();
    format!(
        "{prefix}{cell}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// A fresh tenant API key: `bw_` + 32 URL-safe base64 characters (24 random bytes), or with a
/// cell `bw_<cell>_` + the same 32 (`bw_eu1_…`).
///
/// A key without a cell is exactly 35 characters and one with a cell at least 37, so no key
/// minted before its deployment had cells can be read as naming a cell, whatever its random
/// characters (`_` is one of them): [`credential_cell`].
pub(crate) fn generate_api_key(cell: Option<&Cell>) -> String {
    generate_credential(TENANT_KEY_PREFIX, cell, 24)
}

/// The cell a credential names by its shape, or `None` for one that names none (minted
/// without a cell, or not a credential at all). `random_chars` is the length of the random part
/// after `prefix` (32 for an API key, 43 for a portal token): `<prefix><cell>_<random_chars>`,
/// the cell 1 to 8 of `a`–`z0`–`9`. The router of deploy/cells/haproxy.cfg.in reads keys by
/// the same rule.
pub fn credential_cell<'a>(
    credential: &'a str,
    prefix: &str,
    random_chars: usize,
) -> Option<&'a str> {
    let rest = credential.strip_prefix(prefix)?;
    let cell_len = rest.len().checked_sub(random_chars + 1)?;
    let (cell, random) = rest.split_at(cell_len);
    (Cell::new(cell).is_ok() && random.starts_with('_')).then_some(cell)
}

/// The stored digest of a key (32 bytes of SHA-256).
pub(crate) fn hash_key(key: &str) -> Vec<u8> {
    Sha256::digest(key.as_bytes()).to_vec()
}

/// The non-secret prefix kept beside the digest to help a person tell keys apart: the first 7
/// characters (`bw_` and 4 random ones), or of a key with a cell its `bw_<cell>_` and 4 random
/// ones (else a long cell id would leave no random character to tell keys apart by).
pub(crate) fn display_prefix(key: &str) -> String {
    let fixed = match credential_cell(key, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS) {
        Some(cell) => TENANT_KEY_PREFIX.len() + cell.len() + 1,
        None => TENANT_KEY_PREFIX.len(),
    };
    key.chars().take(fixed + 4).collect()
}

/// Compares a presented key with an expected one in constant time (by their digests).
pub fn keys_match(presented: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    hash_key(presented).ct_eq(&hash_key(expected)).into()
}

/// `last_used_at` is written at most once per this many seconds per key (so a busy key costs no
/// write per request); the value it shows is at most this old.
pub(crate) const LAST_USED_RESOLUTION_S: u32 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_prefixed_and_hash_to_32_bytes() {
        let a = generate_api_key(None);
        let b = generate_api_key(None);
        assert_ne!(a, b);
        assert!(a.starts_with(TENANT_KEY_PREFIX));
        assert_eq!(a.len(), 3 + 32);
        assert_eq!(display_prefix(&a), a[..7]);
        assert_eq!(hash_key(&a).len(), 32);
        assert_ne!(hash_key(&a), hash_key(&b));
        assert!(keys_match(&a, &a.clone()));
        assert!(!keys_match(&a, &b));
    }

    #[test]
    fn a_key_of_a_cell_names_it_and_a_key_without_never_does() {
        let cell = Cell::new("eu1").unwrap();
        let k = generate_api_key(Some(&cell));
        assert!(k.starts_with("bw_eu1_"), "{k}");
        assert_eq!(k.len(), "bw_eu1_".len() + KEY_RANDOM_CHARS);
        assert_eq!(
            credential_cell(&k, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
            Some("eu1")
        );
        assert_eq!(display_prefix(&k), k[..11]);
        // A key minted without a cell whose random part happens to read `<cell>_…` is still
        // no cell's: its length tells.
        let lookalike = format!("bw_eu1_{}", "A".repeat(KEY_RANDOM_CHARS - 4));
        assert_eq!(lookalike.len(), 35);
        assert_eq!(
            credential_cell(&lookalike, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
            None
        );
        for _ in 0..1000 {
            let plain = generate_api_key(None);
            assert_eq!(
                credential_cell(&plain, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
                None
            );
        }
        // Not a cell: upper case, too long, empty.
        for bad in ["EU1", "abcdefghi", ""] {
            assert!(Cell::new(bad).is_err(), "{bad}");
            let forged = format!("bw_{bad}_{}", "A".repeat(KEY_RANDOM_CHARS));
            assert_eq!(
                credential_cell(&forged, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
                None
            );
        }
        assert!(Cell::new("a").is_ok() && Cell::new("abcdefg8").is_ok());
    }
}
