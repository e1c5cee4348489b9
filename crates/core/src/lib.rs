//! Breakwater's domain: tenants and their API keys, channels (endpoints) and their circuit,
//! deliveries and their attempts, Standard Webhooks signing, outcome classification and the
//! checks on outbound targets.
//!
//! SQL lives next to the type that owns the table; functions take an executor or a connection so
//! they can run inside a caller's transaction. Decisions that need no database (classifying an
//! HTTP outcome, parsing `Retry-After`, checking an address) are pure functions.

/// The two directions between a state enum and its `text` column value, from one table of
/// `Variant => "text"` pairs: `as_str` (the column value) and `parse` (the variant of a column
/// value; any other text is [`Error::Invalid`] naming `$field`, "unknown `$what` …"), and `ALL`,
/// every variant in the table's order. The
/// enum's sqlx and serde derives must spell the same texts (`rename_all = "snake_case"`).
macro_rules! column_text {
    ($ty:ident, field $field:literal, what $what:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order (the order metrics and refusals list them).
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The column value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text,)+
                }
            }

            /// Parses the column value.
            pub fn parse(s: &str) -> $crate::Result<Self> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err($crate::Error::invalid(
                        $field,
                        format!(concat!("unknown ", $what, " {:?}"), other),
                    )),
                }
            }
        }

        impl $crate::ColumnText for $ty {
            const ALL: &'static [Self] = $ty::ALL;

            fn as_str(self) -> &'static str {
                $ty::as_str(self)
            }
        }
    };
}

/// A state or status kept in a `text` column (a circuit's state, a delivery's status): every
/// value and its column text, for code that handles any of them alike (the API's list filters).
/// Implemented by `column_text!`, from the one table of texts each enum has.
pub trait ColumnText: Copy + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];

    /// The column value (and JSON string).
    fn as_str(self) -> &'static str;
}

pub mod alerts;
pub mod api_key;
pub mod audit;
pub mod channels;
pub mod circuit;
pub mod clock;
pub mod deliveries;
pub mod doctor;
pub mod endpoint;
mod error;
pub mod event_types;
pub mod filters;
pub mod hosts;
pub(crate) mod ingress;
pub mod jobs;
pub mod keys;
pub mod lifecycle;
pub mod messages;
pub mod names;
pub mod outcome;
pub mod overview;
pub mod page;
pub mod patch;
pub mod portal;
pub mod quotas;
pub mod ratelimit;
pub mod retention;
pub mod retry_policy;
pub mod signing;
pub mod targets;
pub mod tenants;
#[cfg(feature = "testing")]
pub mod testing;
mod tier;

pub use error::{Error, Result};
pub use tier::Tier;

/// The embedded migrations (workspace `migrations/`), shared by `breakwater migrate`, server
/// start-up and the tests.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// The job kind of a delivery attempt (defined in the registry, [`jobs::JOB_DELIVER`]).
pub(crate) use jobs::JOB_DELIVER;
