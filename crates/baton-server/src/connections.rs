//! The connections a server holds, bounded: past [`Options::max_connections`] the oldest
//! connection that has not yet shown a valid key is closed, so a flood of half-sent or
//! keyless requests cannot crowd out a client that authenticated.
//!
//! [`Options::max_connections`]: crate::Options::max_connections

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How often shed connections are reported on stderr.
const SHED_REPORT: Duration = Duration::from_secs(5);

/// Marks the connection a request came on as holding a valid key (left on each request
/// by [`crate::serve`]; set by the key extractor).
#[derive(Clone)]
pub(crate) struct Keyed(Arc<AtomicBool>);

impl Keyed {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

struct Open {
    keyed: Arc<AtomicBool>,
    shed: oneshot::Sender<()>,
}

#[derive(Default)]
struct Held {
    /// By order of arrival: the first keyless entry is the oldest.
    open: BTreeMap<u64, Open>,
    next: u64,
    reported: Option<Instant>,
    unreported: u64,
}

/// The open connections and the cap on them.
pub(crate) struct Connections {
    cap: usize,
    held: Mutex<Held>,
    shed: AtomicU64,
}

/// One admitted connection: its mark for requests, the signal that it is shed, and its
/// place in the table (given up when dropped).
pub(crate) struct Admitted {
    pub keyed: Keyed,
    pub shed: oneshot::Receiver<()>,
    pub place: Place,
}

pub(crate) struct Place {
    id: u64,
    connections: Arc<Connections>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.connections.lock().open.remove(&self.id);
    }
}

impl Connections {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            held: Mutex::default(),
            shed: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a new connection in; when that puts the server over its cap, the oldest
    /// connection without a valid key (the new one itself, if every other has one) is
    /// told to close.
    pub(crate) fn admit(self: &Arc<Self>) -> Admitted {
        let keyed = Arc::new(AtomicBool::new(false));
        let (tell, shed) = oneshot::channel();
        let mut held = self.lock();
        let id = held.next;
        held.next += 1;
        held.open.insert(
            id,
            Open {
                keyed: Arc::clone(&keyed),
                shed: tell,
            },
        );
        if held.open.len() > self.cap {
            let oldest = held
                .open
                .iter()
                .find(|(_, open)| !open.keyed.load(Ordering::Relaxed))
                .map(|(id, _)| *id);
            if let Some(open) = oldest.and_then(|id| held.open.remove(&id)) {
                let _ = open.shed.send(());
                self.shed.fetch_add(1, Ordering::Relaxed);
                held.unreported += 1;
                if held.reported.is_none_or(|at| at.elapsed() >= SHED_REPORT) {
                    eprintln!(
                        "baton serve: at its cap of {} connections; closed {} without a valid \
                         key since the last report (--max-connections)",
                        self.cap, held.unreported
                    );
                    held.reported = Some(Instant::now());
                    held.unreported = 0;
                }
            }
        }
        Admitted {
            keyed: Keyed(keyed),
            shed,
            place: Place {
                id,
                connections: Arc::clone(self),
            },
        }
    }

    /// Connections closed to stay under the cap since the server started.
    pub(crate) fn shed(&self) -> u64 {
        self.shed.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.lock().open.len()
    }
}

/// The cap a server takes when none is given: three quarters of the descriptors the
/// process may open (the rest serve the stores, webhooks and logs), at most 16,384.
pub fn default_max_connections() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    usize::try_from(soft / 4 * 3)
        .unwrap_or(usize::MAX)
        .clamp(16, 16_384)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_keyless_connection_is_shed_and_keyed_ones_stay() {
        let connections = Connections::new(3);
        let mut first = connections.admit();
        first.keyed.set();
        let mut second = connections.admit();
        let mut third = connections.admit();
        assert_eq!(connections.open(), 3);
        // A fourth: the oldest without a key is the second.
        let fourth = connections.admit();
        assert!(second.shed.try_recv().is_ok());
        assert!(first.shed.try_recv().is_err());
        assert!(third.shed.try_recv().is_err());
        assert_eq!(connections.open(), 3);
        // Every other keyed: the newcomer is the one shed.
        third.keyed.set();
        fourth.keyed.set();
        let mut fifth = connections.admit();
        assert!(fifth.shed.try_recv().is_ok());
        assert_eq!(connections.shed(), 2);
        // A connection that ends gives its place up.
        drop(first);
        assert_eq!(connections.open(), 2);
    }
}
