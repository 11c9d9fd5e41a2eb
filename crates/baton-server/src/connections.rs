//! The connections a server holds, bounded: past [`Options::max_connections`] one is
//! closed to make room for the newcomer. A flood of half-sent or keyless requests goes
//! first (the oldest connection that has not yet shown a valid key); when every other
//! connection has one, each key keeps a share: the key holding the most connections loses
//! its oldest idle one (its oldest, if none is idle). A newcomer is never the one closed,
//! so a client with a key of its own is always heard, however many keep-alive connections
//! another key holds.
//!
//! [`Options::max_connections`]: crate::Options::max_connections

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How often closed connections are reported on stderr.
const SHED_REPORT: Duration = Duration::from_secs(5);

/// Marks the connection a request came on with the valid key it showed (left on each
/// request by [`crate::serve`]; set by the key extractor).
#[derive(Clone)]
pub(crate) struct Keyed(Arc<AtomicU64>);

impl Keyed {
    /// The connection showed the valid key `key` (its id, never its token).
    pub(crate) fn set(&self, key: &str) {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        // 0 means "no key yet".
        self.0.store(hasher.finish() | 1, Ordering::Relaxed);
    }
}

/// Counts the requests in flight on a connection: it is idle when none is.
#[derive(Clone)]
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Busy {
    /// One request more in flight until the guard (kept with its response's body) drops.
    pub(crate) fn start(&self) -> InFlight {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(&self.0))
    }
}

pub(crate) struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request counted in flight until it is sent whole (a
/// long poll, an event stream).
pub(crate) struct Counted {
    pub(crate) body: axum::body::Body,
    pub(crate) _in_flight: InFlight,
}

impl axum::body::HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

struct Open {
    /// A hash of the valid key its requests showed; 0 while none has.
    key: Arc<AtomicU64>,
    busy: Arc<AtomicUsize>,
    shed: oneshot::Sender<()>,
}

impl Open {
    fn key(&self) -> u64 {
        self.key.load(Ordering::Relaxed)
    }

    fn idle(&self) -> bool {
        self.busy.load(Ordering::Relaxed) == 0
    }
}

#[derive(Default)]
struct Held {
    /// By order of arrival: the first of a kind is the oldest.
    open: BTreeMap<u64, Open>,
    next: u64,
    reported: Option<Instant>,
    unreported: u64,
}

/// Which connection to close to make room for `newcomer`: the oldest without a valid key
/// other than the newcomer (which has had no chance to show one); else, of the key
/// holding the most connections (the one with the oldest, between equals), the oldest
/// idle connection, or its oldest when all are busy.
fn victim(open: &BTreeMap<u64, Open>, newcomer: u64) -> Option<u64> {
    let others = || open.iter().filter(move |(id, _)| **id != newcomer);
    if let Some((id, _)) = others().find(|(_, o)| o.key() == 0) {
        return Some(*id);
    }
    let mut held: HashMap<u64, usize> = HashMap::new();
    for (_, o) in others() {
        *held.entry(o.key()).or_default() += 1;
    }
    let most = held.values().copied().max()?;
    let (_, first) = others().find(|(_, o)| held[&o.key()] == most)?;
    let key = first.key();
    others()
        .filter(|(_, o)| o.key() == key)
        .find(|(_, o)| o.idle())
        .or_else(|| others().find(|(_, o)| o.key() == key))
        .map(|(id, _)| *id)
}

/// The open connections and the cap on them.
pub(crate) struct Connections {
    cap: usize,
    held: Mutex<Held>,
    shed: AtomicU64,
}

/// One admitted connection: its marks for requests, the signal that it is shed, and its
/// place in the table (given up when dropped).
pub(crate) struct Admitted {
    pub keyed: Keyed,
    pub busy: Busy,
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

    /// Takes a new connection in; when that puts the server over its cap, another is told
    /// to close ([`victim`]).
    pub(crate) fn admit(self: &Arc<Self>) -> Admitted {
        let key = Arc::new(AtomicU64::new(0));
        let busy = Arc::new(AtomicUsize::new(0));
        let (tell, shed) = oneshot::channel();
        let mut held = self.lock();
        let id = held.next;
        held.next += 1;
        held.open.insert(
            id,
            Open {
                key: Arc::clone(&key),
                busy: Arc::clone(&busy),
                shed: tell,
            },
        );
        if held.open.len() > self.cap
            && let Some(open) = victim(&held.open, id).and_then(|v| held.open.remove(&v))
        {
            let _ = open.shed.send(());
            self.shed.fetch_add(1, Ordering::Relaxed);
            held.unreported += 1;
            if held.reported.is_none_or(|at| at.elapsed() >= SHED_REPORT) {
                eprintln!(
                    "baton serve: at its cap of {} connections; closed {} since the last \
                     report, those without a valid key first, then the oldest idle one of \
                     the key holding the most (--max-connections)",
                    self.cap, held.unreported
                );
                held.reported = Some(Instant::now());
                held.unreported = 0;
            }
        }
        Admitted {
            keyed: Keyed(key),
            busy: Busy(busy),
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
        first.keyed.set("k1");
        let mut second = connections.admit();
        let mut third = connections.admit();
        assert_eq!(connections.open(), 3);
        // A fourth: the oldest without a key is the second.
        let mut fourth = connections.admit();
        assert!(second.shed.try_recv().is_ok());
        assert!(first.shed.try_recv().is_err());
        assert!(third.shed.try_recv().is_err());
        assert!(fourth.shed.try_recv().is_err());
        assert_eq!(connections.open(), 3);
        // A newcomer is never the one shed: it has had no chance to show a key.
        let mut fifth = connections.admit();
        assert!(
            third.shed.try_recv().is_ok(),
            "the oldest keyless but the newcomer"
        );
        assert!(fifth.shed.try_recv().is_err());
        assert_eq!(connections.shed(), 2);
        // A connection that ends gives its place up.
        drop(first);
        assert_eq!(connections.open(), 2);
    }

    #[test]
    fn a_key_over_its_share_loses_its_oldest_idle_connection_and_a_newcomer_is_heard() {
        let connections = Connections::new(4);
        let mut hog: Vec<Admitted> = (0..4).map(|_| connections.admit()).collect();
        for c in &hog {
            c.keyed.set("hog");
        }
        // The oldest is in the middle of a request: the oldest idle one goes instead.
        let in_flight = hog[0].busy.start();
        let mut newcomer = connections.admit();
        assert!(newcomer.shed.try_recv().is_err(), "the newcomer is heard");
        assert!(hog[0].shed.try_recv().is_err(), "busy, so kept");
        assert!(hog[1].shed.try_recv().is_ok(), "the oldest idle one");
        newcomer.keyed.set("other");
        drop(in_flight);
        // Another newcomer: the hog still holds the most, and loses its oldest.
        let mut third = connections.admit();
        third.keyed.set("third");
        assert!(hog[0].shed.try_recv().is_ok());
        assert!(newcomer.shed.try_recv().is_err());
        assert_eq!(connections.open(), 4);
        // The hog holds two now, the others one each: the hog loses again, never the
        // key with one connection.
        let _fourth = connections.admit();
        assert!(hog[2].shed.try_recv().is_ok());
        assert!(newcomer.shed.try_recv().is_err());
        assert!(third.shed.try_recv().is_err());
        assert!(hog[3].shed.try_recv().is_err());
    }
}
