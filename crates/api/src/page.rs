//! Cursor pagination: the one way every list route pages.
//!
//! Every list route takes `?after=<cursor>&limit=<n>` and answers
//! `{"data": [...], "next_cursor": "<cursor>" | null}`. `limit` is 1–1000 (default 100);
//! `next_cursor` is `null` on the last page, otherwise pass it back as `after` for the next
//! page. A cursor is opaque: the base64url (no padding) of a one-byte tag naming the kind of key
//! and the key of the page's last row, e.g. a delivery's `created_at` in microseconds since
//! the epoch (big-endian i64) and its id (16 bytes), so rows that share a timestamp (a batch
//! accepted in one transaction) still page exactly: no duplicates, no gaps. Paging is keyset
//! ([`breakwater_core::page`]): a page costs the same wherever it is in the list.
//!
//! Errors: a `limit` outside 1–1000 or not a number, and an `after` that is not a cursor of
//! this list, are 422 naming the field.

use crate::error::ApiError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use breakwater_core::page::{Keyset, Order};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Rows per page when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 100;
/// Most rows per page.
pub const MAX_LIMIT: i64 = 1000;

/// A list key that a cursor can carry.
pub(crate) trait CursorKey: Sized {
    /// The first byte of the cursor: which kind of key follows.
    const TAG: u8;
    /// The key's bytes.
    fn to_bytes(&self) -> Vec<u8>;
    /// The key from exactly its bytes, or `None`.
    fn from_bytes(b: &[u8]) -> Option<Self>;
}

/// An id (channels, tenants: time-ordered UUIDv7).
impl CursorKey for Uuid {
    const TAG: u8 = b'u';
    fn to_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        Uuid::from_slice(b).ok()
    }
}

/// A text key (host circuits: the host key).
impl CursorKey for String {
    const TAG: u8 = b's';
    fn to_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        String::from_utf8(b.to_vec()).ok()
    }
}

/// A sequence number (audit entries).
impl CursorKey for i64 {
    const TAG: u8 = b'i';
    fn to_bytes(&self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        Some(i64::from_be_bytes(b.try_into().ok()?))
    }
}

/// A creation time in microseconds and an id (deliveries).
impl CursorKey for (DateTime<Utc>, Uuid) {
    const TAG: u8 = b't';
    fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.0.timestamp_micros().to_be_bytes().to_vec();
        v.extend_from_slice(self.1.as_bytes());
        v
    }
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != 24 {
            return None;
        }
        let micros = i64::from_be_bytes(b[..8].try_into().ok()?);
        let at = DateTime::<Utc>::from_timestamp_micros(micros)?;
        Some((at, Uuid::from_slice(&b[8..]).ok()?))
    }
}

/// The opaque cursor of `key`.
pub(crate) fn encode<K: CursorKey>(key: &K) -> String {
    let mut raw = vec![K::TAG];
    raw.extend(key.to_bytes());
    URL_SAFE_NO_PAD.encode(raw)
}

/// The key in `cursor`, or `None` if it is not a cursor of this kind of key.
pub(crate) fn decode<K: CursorKey>(cursor: &str) -> Option<K> {
    let raw = URL_SAFE_NO_PAD.decode(cursor.trim()).ok()?;
    let (&tag, rest) = raw.split_first()?;
    (tag == K::TAG).then(|| K::from_bytes(rest)).flatten()
}

/// The paging parameters of a list route's query string: `?after=&limit=`. Flatten it into
/// the route's query struct (both are strings, so that any bad value is a 422 naming the field,
/// not a 400 from the query parser).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct PageQuery {
    /// The previous page's `next_cursor`.
    after: Option<String>,
    /// Rows per page, 1–1000 (default 100).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

impl PageQuery {
    /// Checks the parameters and returns the keyset to query, asking for one row more than
    /// the page shows (to know whether there is a next page).
    pub(crate) fn keyset<K: CursorKey>(&self, order: Order) -> Result<Keyset<K>, ApiError> {
        let limit = match self.limit.as_deref() {
            None => DEFAULT_LIMIT,
            Some(s) => s
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
                })?,
        };
        let after = match self.after.as_deref() {
            None | Some("") => None,
            Some(c) => Some(decode::<K>(c).ok_or_else(|| {
                ApiError::invalid(
                    "after",
                    "is not a cursor of this list (pass back the next_cursor of its previous page)",
                )
            })?),
        };
        Ok(Keyset {
            after,
            limit: limit + 1,
            order,
        })
    }
}

/// A page of a list: its rows and the cursor of the next page (`null` on the last one).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Page<T> {
    /// The rows, in the list's order.
    pub(crate) data: Vec<T>,
    /// Pass as `after` for the next page; `null` when this is the last page.
    pub(crate) next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The page shown from `rows` fetched with `keyset` (one more than the page holds when
    /// there is a next page); `key` gives a row's list key.
    pub(crate) fn new<K: CursorKey>(
        mut rows: Vec<T>,
        keyset: &Keyset<K>,
        key: impl Fn(&T) -> K,
    ) -> Self {
        let shown = (keyset.limit - 1).max(0) as usize;
        let more = rows.len() > shown;
        rows.truncate(shown);
        let next_cursor = if more {
            rows.last().map(|r| encode(&key(r)))
        } else {
            None
        };
        Page {
            data: rows,
            next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_cursor_keeps_microseconds_and_the_id() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_764_452_402_123_456).unwrap();
        let id = Uuid::now_v7();
        let c = encode(&(at, id));
        assert!(c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(decode::<(DateTime<Utc>, Uuid)>(&c), Some((at, id)));
    }

    #[test]
    fn a_cursor_of_another_kind_or_garbage_is_refused() {
        let c = encode(&42i64);
        assert_eq!(decode::<i64>(&c), Some(42));
        assert_eq!(decode::<Uuid>(&c), None);
        assert_eq!(decode::<(DateTime<Utc>, Uuid)>(&c), None);
        for bad in ["", "!!", "dGVzdA", "AAAA", &c[..c.len() - 1]] {
            assert_eq!(decode::<i64>(bad), None, "{bad}");
        }
    }

    #[test]
    fn limits_outside_1_to_1000_are_422_naming_the_field() {
        for bad in ["0", "1001", "-1", "ten", "1.5"] {
            let q = PageQuery {
                after: None,
                limit: Some(bad.into()),
            };
            let e = q.keyset::<i64>(Order::NewestFirst).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.field.as_deref()),
                (422, Some("limit")),
                "{bad}"
            );
        }
        let q = PageQuery::default();
        assert_eq!(q.keyset::<i64>(Order::NewestFirst).unwrap().limit, 101);
        let q = PageQuery {
            after: Some("nope".into()),
            limit: None,
        };
        let e = q.keyset::<i64>(Order::NewestFirst).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("after"));
    }

    #[test]
    fn a_page_shows_limit_rows_and_a_cursor_only_when_more_exist() {
        let ks = Keyset::<i64> {
            after: None,
            limit: 3,
            order: Order::OldestFirst,
        };
        let p = Page::new(vec![1i64, 2, 3], &ks, |r| *r);
        assert_eq!(p.data, [1, 2]);
        assert_eq!(p.next_cursor.as_deref().and_then(decode::<i64>), Some(2));
        let p = Page::new(vec![1i64, 2], &ks, |r| *r);
        assert_eq!((p.data.len(), p.next_cursor), (2, None));
    }

    #[test]
    fn page_query_flattens_into_a_route_query() {
        #[derive(Deserialize)]
        struct Q {
            status: Option<String>,
            #[serde(flatten)]
            page: PageQuery,
        }
        let q: Q = serde_urlencoded_like("status=dead&limit=10&after=abc");
        assert_eq!(q.status.as_deref(), Some("dead"));
        assert_eq!(q.page.limit.as_deref(), Some("10"));
        assert_eq!(q.page.after.as_deref(), Some("abc"));
    }

    /// Parses a query string the way axum's `Query` does.
    fn serde_urlencoded_like<T: serde::de::DeserializeOwned>(s: &str) -> T {
        let uri: axum::http::Uri = format!("/x?{s}").parse().unwrap();
        axum::extract::Query::<T>::try_from_uri(&uri).unwrap().0
    }
}
