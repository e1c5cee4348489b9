//! Keyset ("seek") pagination in SQL: the one way every list query pages.
//!
//! A page is the first `limit` rows, in a fixed total order on a key (unique: it ends with the
//! row's id), that come strictly after the last key of the previous page. Unlike an offset, the
//! cost of a page does not grow with how far into the list it is (an index on the key columns
//! seeks to the position), and rows inserted or deleted meanwhile never shift a page: no
//! duplicates, no gaps.
//!
//! Every list function takes a [`Keyset`] and builds its statement with [`Keyset::seek`] and
//! [`Keyset::order_by`]. The seek condition is left out when there is no cursor (rather than
//! `$n IS NULL OR …`), so the planner always sees a plain row comparison it can turn into an
//! index range, whichever plan it caches.

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
    pub fn seek(&self, cols: &str, first: usize) -> String {
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

    /// `ORDER BY c1 ASC, c2 ASC` (or `DESC`) over the key columns `cols`.
    pub fn order_by(&self, cols: &str) -> String {
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
