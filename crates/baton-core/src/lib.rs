//! Baton's pure domain: names, message envelopes, the lifecycles (deliveries, orders,
//! runs) and their planners — a request and the facts it depends on in, the events to
//! append (or a [`Refusal`], as data) out — the project state, and the events that record
//! every change, and the negotiation engine.
//!
//! This crate does no I/O, reads no clock and spawns nothing: every function takes the
//! facts it needs as arguments, so it is tested as data. Storage lives in `baton-store`,
//! the terminal in `baton`.

pub mod after;
pub mod authority;
pub mod awl;
pub mod delivery;
pub mod effect;
pub mod event;
pub mod gate;
pub mod handover;
pub mod id;
pub mod json;
pub mod key;
pub mod message;
pub mod metrics;
pub mod names;
pub mod negotiation;
pub mod order;
pub mod packet;
pub mod participant;
pub mod pool;
pub mod portable;
pub mod queue;
pub mod record;
pub mod refusal;
pub mod reservation;
pub mod run;
pub mod search;
pub mod state;
pub mod statefile;
pub mod time;
pub mod webhook;

pub use authority::{Denied, Policy, Power};
pub use delivery::{DeliveryAction, DeliveryStatus, RequestAction, RequestStatus, Verb};
pub use event::{Change, Event};
pub use message::{Draft, Envelope, MessageType, Payload, PayloadError, Recipient};
pub use names::{NameError, Passname, ProjectName, Topic};
pub use participant::Participant;
pub use refusal::{Field, InvalidTransition, Record, Refusal, RefusalKind};
pub use time::Millis;
