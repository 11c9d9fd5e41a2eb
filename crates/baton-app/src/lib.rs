//! Baton's use cases: the one layer the CLI, `baton mcp` and the HTTP server call.
//!
//! A use case composes store calls into what a user asked for — a send with its reply
//! defaults and payload cap, a capped show, an order offered after its documents were
//! checked, a wait that fails loud at its deadline, the resume packet, a reaper pass, a
//! negotiation settled once its last position is in — and returns typed values ([`doc`]
//! holds the documents the edges print). The rules are
//! `baton_core`'s; the storage is a [`Store`]; the machine (git, files, processes, the
//! clock) is a [`Host`]. This crate never reads files, environment variables or the
//! terminal itself, and an edge that needs more than parsing its input and rendering the
//! result is missing a use case here.

mod authority;
pub mod doc;
mod effects;
pub mod host;
mod keys;
mod ledger;
mod memory;
mod messages;
mod negotiation;
mod news;
pub mod ops;
mod orders;
mod pools;
pub mod portable;
mod queue;
pub mod recall;
mod receipts;
mod reservations;
mod review;
pub mod settings;
mod status;
mod wait;
mod webhooks;

use std::path::Path;
use std::sync::Arc;

use baton_core::{Millis, Record, id};
use baton_store::{Store, StoreError};

pub use authority::PolicyEdit;
pub use baton_core::order::newest_report;
pub use effects::{Approval, ToolRunner};
pub use host::{Clock, Files, Hashed, Host, PathClock, PathProblem, Processes};
pub use keys::Caller;
pub use ledger::{Pass, RunRow};
pub use memory::{Imported, Recorded};
pub use messages::{Body, LIST_PAGE, Layout, MAX_LIST_PAGE, Outgoing, Shown};
pub use news::News;
pub use orders::{OrderStep, OrderView};
pub use queue::MAX_NEED_BYTES;
pub use receipts::{Verdict, Verified};
pub use reservations::{Held, RESERVATIONS_PAGE};
pub use review::{ReviewDone, ReviewStart, Reviewed};
pub use settings::Settings;
pub use status::RECENT_MS;
pub use wait::POLL;
pub use webhooks::{Attempt, Delivery, Poster};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A project's use cases: its store, its settings and the host it runs on.
#[derive(Clone)]
pub struct App {
    store: Store,
    settings: Settings,
    host: Host,
    on_wait: Option<WaitSignal>,
}

/// What [`App::on_wait`] calls when a wait blocks.
type WaitSignal = Arc<dyn Fn(&str) + Send + Sync>;

impl App {
    pub fn new(store: Store, settings: Settings, host: Host) -> Self {
        Self {
            store,
            settings,
            host,
            on_wait: None,
        }
    }

    /// Tells `signal` what a wait waits for at the moment it blocks (its first look found
    /// nothing), so an edge can say so — a CLI waiter prints a line on stderr.
    pub fn on_wait(mut self, signal: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_wait = Some(Arc::new(signal));
        self
    }

    pub(crate) fn waiting(&self, what: &str) {
        if let Some(signal) = &self.on_wait {
            signal(what);
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.host.root
    }

    pub fn now(&self) -> Millis {
        self.host.clock.now()
    }

    /// The store's generation: the position of its newest event.
    pub async fn generation(&self) -> Result<i64> {
        self.store.generation().await
    }

    /// The id of `record`'s kind that `text` names: the id itself, or a prefix of at least
    /// six characters that begins no other, in either case (`baton_core::id`). Every edge
    /// reaches a record through this, so each takes what a person copied alike.
    pub async fn resolve(&self, record: Record, text: &str) -> Result<String> {
        let found = self.store.ids(record, &id::spans(text)).await?;
        Ok(id::pick(record, text, &found)?)
    }

    fn store(&self) -> &Store {
        &self.store
    }
}
