//! Tenant tiers. Each tier's queue is named in the registry ([`Tier::queue`], in [`crate::jobs`]).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A tenant's tier; it picks the queue its deliveries run on (docs/design.md, "Tiers").
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
