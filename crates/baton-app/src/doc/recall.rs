//! The resume packet, with its per-section counts.

use baton_core::Passname;
use baton_core::packet::Shown as SectionShown;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The resume packet: its text (what an agent reads), with per-section counts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Resume {
    pub participant: Passname,
    pub generation: i64,
    pub max_bytes: usize,
    pub bytes: usize,
    pub sections: Vec<Section>,
    pub text: String,
}
doc!(Resume, "baton/resume@1");

/// What the packet showed of one section.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Section {
    pub title: String,
    pub shown: usize,
    pub total: usize,
}

impl From<SectionShown> for Section {
    fn from(s: SectionShown) -> Self {
        Self {
            title: s.title.to_owned(),
            shown: s.shown,
            total: s.total,
        }
    }
}

impl Resume {
    pub fn new(me: &Passname, max_bytes: usize, r: crate::recall::Resume) -> Self {
        Self {
            participant: me.clone(),
            generation: r.generation,
            max_bytes,
            bytes: r.packet.text.len(),
            sections: r.packet.sections.into_iter().map(Section::from).collect(),
            text: r.packet.text,
        }
    }
}
