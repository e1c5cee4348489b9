//! Keyset ("seek") pagination in SQL: the one way every list query pages.
//!
//! A page is the first `limit` rows, in a fixed total order on a key (unique: it ends with the
//! row's id), that come strictly after the last key of the previous page. Unlike an offset, the
//! cost of a page does not grow with how far into the list it is (an index on the key columns
//! seeks to the position), and rows inserted or deleted meanwhile never shift a page: no
//! duplicates, no gaps.
//!
//! Every list function takes a [`Keyset`] and builds its statement with [`Keyset::seek`] and
//! [`Keyset::order_by`], then binds the cursor with [`Keyset::bind_cursor`] after its other
//! parameters. The seek condition is left out when there is no cursor (rather than
//! `$n IS NULL OR …`), so the planner always sees a plain row comparison it can turn into an
//! index range, whichever plan it caches.

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, Postgres};
use sqlx::query::QueryAs;
use uuid::Uuid;

/// A `query_as` statement on Postgres whose rows are read as `O`.
type Query<'q, O> = QueryAs<'q, Postgres, O, PgArguments>;

/// The order of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Ascending: oldest first (ids and creation times grow).
    OldestFirst,
    /// Descending: newest first.
    NewestFirst,
}

/// A page request on a key of type `K`: the last key of the previous page (exclusive) and how
/// many rows to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyset<K> {
    /// Start strictly after this key (in the list's order); `None` = from the start.
    pub after: Option<K>,
    /// Rows to return (the API asks for one more than it shows, to know whether a next page
    /// exists).
    pub limit: i64,
    /// The list's order.
    pub order: Order,
}

impl<K> Keyset<K> {
    /// `AND (cols) > ($first, …)` (or `<` newest first) when there is a cursor, else `""`.
    /// `cols` are the key columns, comma-separated (e.g. `"d.created_at, d.id"`); the cursor's
    /// values are bound as parameters `$first`, `$first + 1`, … in that order.
    pub(crate) fn seek(&self, cols: &str, first: usize) -> String {
        if self.after.is_none() {
            return String::new();
        }
        let n = cols.split(',').count();
        let params: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
        let op = match self.order {
            Order::OldestFirst => ">",
            Order::NewestFirst => "<",
        };
        format!(" AND ({cols}) {op} ({})", params.join(", "))
    }

    /// `q` with the cursor's values bound as its next parameters, one per key column in order:
    /// the `$first, …` of [`Keyset::seek`], so bind every other parameter first. Without a
    /// cursor `q` is returned as it is (the seek condition is left out too).
    pub(crate) fn bind_cursor<'q, O>(&self, q: Query<'q, O>) -> Query<'q, O>
    where
        K: Key + Clone,
    {
        match &self.after {
            Some(key) => key.clone().bind_to(q),
            None => q,
        }
    }

    /// `ORDER BY c1 ASC, c2 ASC` (or `DESC`) over the key columns `cols`.
    pub(crate) fn order_by(&self, cols: &str) -> String {
        let dir = match self.order {
            Order::OldestFirst => "ASC",
            Order::NewestFirst => "DESC",
        };
        let terms: Vec<String> = cols
            .split(',')
            .map(|c| format!("{} {dir}", c.trim()))
            .collect();
        format!(" ORDER BY {}", terms.join(", "))
    }
}

/// A list key that binds itself as statement parameters, one per key column (the cursor of
/// [`Keyset::bind_cursor`]).
pub trait Key {
    /// `q` with this key's values bound, in the order of the key columns.
    fn bind_to<'q, O>(self, q: Query<'q, O>) -> Query<'q, O>;
}

/// An id key (`id`, `c.id`): UUIDv7, time-ordered.
impl Key for Uuid {
    fn bind_to<'q, O>(self, q: Query<'q, O>) -> Query<'q, O> {
        q.bind(self)
    }
}

/// A sequence number key (the audit log's `id`).
impl Key for i64 {
    fn bind_to<'q, O>(self, q: Query<'q, O>) -> Query<'q, O> {
        q.bind(self)
    }
}

/// A text key (a host circuit's `host_key`).
impl Key for String {
    fn bind_to<'q, O>(self, q: Query<'q, O>) -> Query<'q, O> {
        q.bind(self)
    }
}

/// A `(created_at, id)` key (deliveries).
impl Key for (DateTime<Utc>, Uuid) {
    fn bind_to<'q, O>(self, q: Query<'q, O>) -> Query<'q, O> {
        q.bind(self.0).bind(self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_is_left_out_without_a_cursor() {
        let k = Keyset::<i64> {
            after: None,
            limit: 10,
            order: Order::NewestFirst,
        };
        assert_eq!(k.seek("a, b", 3), "");
        assert_eq!(k.order_by("a, b"), " ORDER BY a DESC, b DESC");
    }

    #[test]
    fn seek_compares_the_whole_key_in_the_lists_direction() {
        let k = Keyset {
            after: Some(1),
            limit: 10,
            order: Order::NewestFirst,
        };
        assert_eq!(
            k.seek("d.created_at, d.id", 3),
            " AND (d.created_at, d.id) < ($3, $4)"
        );
        let k = Keyset {
            order: Order::OldestFirst,
            ..k
        };
        assert_eq!(k.seek("id", 2), " AND (id) > ($2)");
        assert_eq!(k.order_by("id"), " ORDER BY id ASC");
    }
}
