//! A delivery's status.

use serde::Serialize;

/// A delivery's status, the `deliveries.status` column (`text`, checked by the table's CHECK
/// constraint; every value since migration `20261130000010_lifecycle`). Decodes from and
/// encodes to that column (`sqlx::Type`) and serializes as the same snake_case word, so the API's
/// JSON shows the column's text. `delivered`, `dead` and `cancelled` are final
/// ([`Status::is_final`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    sqlx::Type,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = DeliveryStatus)]
pub enum Status {
    /// Waiting for its next attempt.
    Pending,
    /// An attempt is in flight.
    Delivering,
    /// Held by an open or paused circuit.
    Paused,
    /// A retry is scheduled.
    Failed,
    /// Final: the endpoint accepted it.
    Delivered,
    /// Final: out of attempts, or a permanent failure.
    Dead,
    /// Final: cancelled by its tenant, or its channel or tenant was deleted.
    Cancelled,
}

column_text!(Status, field "status", what "delivery status", {
    Pending => "pending",
    Delivering => "delivering",
    Paused => "paused",
    Failed => "failed",
    Delivered => "delivered",
    Dead => "dead",
    Cancelled => "cancelled",
});

impl Status {
    /// The statuses a delivery never leaves on its own (only a replay of a `dead` one starts it
    /// again): `delivered`, `dead`, `cancelled`. Retention prunes only these
    /// ([`crate::retention`]); the migration's `deliveries_retention_idx` has the same list.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Delivered | Status::Dead | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
