//! Tenant tiers and their queues.

use crate::jobs::{QUEUE_DELIVERIES, QUEUE_DELIVERIES_BULK, QUEUE_DELIVERIES_HIGH};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A tenant's tier; it picks the queue its deliveries run on (DESIGN.md, "Tiers").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// `deliveries_high`.
    High,
    /// `deliveries`.
    #[default]
    Default,
    /// `deliveries_bulk`.
    Bulk,
}

impl Tier {
    /// Every tier, highest first.
    pub const ALL: [Tier; 3] = [Tier::High, Tier::Default, Tier::Bulk];

    /// The column / API value.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::High => "high",
            Tier::Default => "default",
            Tier::Bulk => "bulk",
        }
    }

    /// The queue this tier's deliveries run on (named in the registry, [`crate::jobs`]).
    pub fn queue(self) -> &'static str {
        match self {
            Tier::High => QUEUE_DELIVERIES_HIGH,
            Tier::Default => QUEUE_DELIVERIES,
            Tier::Bulk => QUEUE_DELIVERIES_BULK,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = crate::Error;

    /// Parses `high`, `default` or `bulk`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "high" => Ok(Tier::High),
            "default" => Ok(Tier::Default),
            "bulk" => Ok(Tier::Bulk),
            other => Err(crate::Error::invalid(
                "tier",
                format!("unknown tier {other:?}; expected one of \"high\", \"default\", \"bulk\""),
            )),
        }
    }
}
