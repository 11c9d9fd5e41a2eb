//! The human queue, what noting an item recorded, and track records.

use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One item of the human queue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueItem {
    /// What `baton queue ack` takes.
    pub id: String,
    pub source: baton_core::queue::Source,
    pub order: Option<String>,
    pub text: String,
    /// When its newest signal happened.
    pub at: String,
    pub label: Option<String>,
}

/// One lane: at most five items, newest signal first, and how many were held back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueLane {
    pub lane: baton_core::queue::Lane,
    pub items: Vec<QueueItem>,
    pub held_back: usize,
}

/// `baton queue`: what needs a person, computed from the log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Queue {
    pub lanes: Vec<QueueLane>,
}
doc!(Queue, "baton/queue@1");

impl Queue {
    pub fn new(lanes: &[baton_core::queue::LaneShown]) -> Self {
        Self {
            lanes: lanes
                .iter()
                .map(|l| QueueLane {
                    lane: l.lane,
                    held_back: l.held_back,
                    items: l
                        .items
                        .iter()
                        .map(|i| QueueItem {
                            id: i.id.clone(),
                            source: i.source,
                            order: i.order.clone(),
                            text: i.text.clone(),
                            at: rfc3339(i.at),
                            label: i.label.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `baton need` and `baton queue ack`: the queue item written or acknowledged.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueNoted {
    pub item: String,
    pub seq: Option<i64>,
}
doc!(QueueNoted, "baton/queue-noted@1");

/// `baton record`: each worker's track record, computed from the log.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TrackRecords {
    pub items: Vec<baton_core::record::TrackRecord>,
}
doc!(TrackRecords, "baton/record@1");
