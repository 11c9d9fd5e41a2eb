//! What is new for a participant since a point in the log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EventRow;

/// What is new for the caller since a point in the log, and where to look next.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct News {
    /// Pass this as `after` next time.
    pub after: i64,
    pub events: Vec<EventRow>,
}
doc!(News, "baton/news@1");

impl From<&crate::News> for News {
    fn from(n: &crate::News) -> Self {
        Self {
            after: n.after,
            events: EventRow::all(&n.events),
        }
    }
}
