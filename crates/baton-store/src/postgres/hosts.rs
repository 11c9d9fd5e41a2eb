//! The hosts a PostgreSQL URL names, and following the writable primary among them.
//!
//! sqlx reads a URL naming one host. A cluster with automatic failover is named by all its
//! hosts, as `pg_autoctl show uri` prints it and libpq reads it:
//! `postgres://HOST1:PORT1,HOST2:PORT2/DATABASE?target_session_attrs=read-write`, "the one
//! of these that takes writes". [`split`] makes one URL per host; a [`Primary`] finds the
//! host answering `NOT pg_is_in_recovery()`, points the pool at it, and looks again when
//! the connection to it fails or it answers read-only. Until it has found one, every call
//! is refused at once with [`StoreError::Reconnecting`] (retryable), and the pool connects
//! nowhere, rather than waiting on a host that is gone or writing to one that is no longer
//! the primary.
//!
//! With one host none of this runs: the store behaves as it always has. Nothing here ever
//! retries a statement: whether a write cut off mid-flight committed is for its caller to
//! settle by retrying it with its idempotency key.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::{Result, StoreError};

/// The parameter naming which host a multi-host URL means; Baton always needs the
/// writable one.
const TARGET: &str = "target_session_attrs";

/// The longest a look for the primary waits on one host that does not answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the pool connects while there is no primary: no such socket, which fails at once
/// (a refused connection would be retried until the busy timeout).
const NOWHERE: &str = "/nonexistent/baton: no primary";

/// Whether a connection may write: the question libpq's `read-write` asks, and whether the
/// server is a standby.
const WRITABLE: &str =
    "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'";

/// The query parameters a URL may carry: Baton's own (`schema`, [`TARGET`]) and those
/// sqlx reads (`options[NAME]` too). sqlx passes over any other with a log line, so a
/// misspelt `sslmode` would connect without what it asked for: it is refused instead.
const PARAMETERS: &[&str] = &[
    "schema",
    TARGET,
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// The values of [`TARGET`] Baton honours: it writes, so it always wants the writable host.
const TARGETS: &[&str] = &["read-write", "primary", "any"];

/// At most the first 40 characters of `text`, for a message about it.
fn short(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Refuses, by name, a query parameter nobody reads and a [`TARGET`] other than one
/// asking for the writable host.
fn check_parameters(query: &str) -> std::result::Result<(), String> {
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let known =
            PARAMETERS.contains(&name) || name.starts_with("options[") && name.ends_with(']');
        if !known {
            return Err(format!(
                "the URL parameter {:?} is not one Baton or its PostgreSQL driver reads; \
                 use {}, or options[NAME]",
                short(name),
                PARAMETERS.join(", ")
            ));
        }
        if name == TARGET && !TARGETS.contains(&value) {
            return Err(format!(
                "{TARGET}={}: Baton writes, so it connects to the writable primary; use \
                 {TARGET}=read-write",
                short(value)
            ));
        }
    }
    Ok(())
}

/// `options` with an IPv6 host as a socket address takes it: sqlx keeps the URL's
/// brackets (`[::1]`), which no resolver reads.
pub(super) fn unbracket(options: PgConnectOptions) -> PgConnectOptions {
    let host = options.get_host();
    match host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .map(str::to_owned)
    {
        Some(inner) => options.host(&inner),
        None => options,
    }
}

/// One URL per host `url` names, in its order: `url` itself when it names one host.
/// `target_session_attrs` is read here, not by sqlx: with several hosts Baton connects to
/// the writable one, so any value asking for another is refused, as is a parameter
/// neither Baton nor sqlx reads.
pub(super) fn split(url: &str) -> std::result::Result<Vec<String>, String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(vec![url.to_owned()]);
    };
    check_parameters(url.split_once('?').map_or("", |(_, q)| q))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), authority),
    };
    if !hosts.contains(',') {
        return Ok(vec![url.to_owned()]);
    }
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        if !pair.starts_with(&format!("{TARGET}=")) {
            kept.push(pair);
        }
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    hosts
        .split(',')
        .map(|host| {
            if host.is_empty() {
                Err(format!("an empty host in the host list {hosts:?}"))
            } else {
                Ok(format!("{scheme}://{user}{host}{path}{query}"))
            }
        })
        .collect()
}

/// How a store reaches its database: the busy timeout, and the primary it follows when
/// its URL names several hosts.
#[derive(Debug, Clone)]
pub(super) struct Link {
    pub(super) busy_timeout: Duration,
    primary: Option<Arc<Primary>>,
}

impl Link {
    /// A link to the one host a URL names.
    pub(super) fn single(busy_timeout: Duration) -> Self {
        Self {
            busy_timeout,
            primary: None,
        }
    }

    /// Maps an engine error to what the user can act on: lock contention is `Busy`
    /// (retryable), never a raw "lock timeout" or "could not serialize"; with several
    /// hosts, a lost or read-only connection is `Reconnecting` (retryable), and the
    /// primary is looked for again on the next call.
    pub(super) fn classify(&self, e: &sqlx::Error) -> StoreError {
        if let Some(primary) = &self.primary {
            if loses_primary(e) {
                primary.lost();
                return primary.reconnecting();
            }
            if matches!(e, sqlx::Error::PoolTimedOut) && !primary.known() {
                return primary.reconnecting();
            }
        }
        let busy = StoreError::Busy {
            timeout_ms: self.busy_timeout.as_millis() as u64,
            holder: None,
        };
        match e {
            sqlx::Error::PoolTimedOut => busy,
            sqlx::Error::Database(db) => match db.code().as_deref() {
                // lock_not_available (lock_timeout ran out), serialization_failure,
                // deadlock_detected: another writer won; the same write may succeed again.
                Some("55P03" | "40001" | "40P01") => busy,
                _ => StoreError::Engine(db.message().to_owned()),
            },
            other => StoreError::Engine(other.to_string()),
        }
    }

    /// `pool`, once it reaches the primary: with several hosts and the primary lost, one
    /// caller at a time looks for it (the others are refused at once).
    pub(super) async fn ready<'p>(&self, pool: &'p PgPool) -> Result<&'p PgPool> {
        if let Some(primary) = &self.primary {
            primary.ready(pool).await?;
        }
        Ok(pool)
    }
}

/// Whether `e` says the connection no longer reaches a writable primary: the connection
/// broke, the server is shutting down or starting up, or it is (now) a standby.
fn loses_primary(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // connection_exception (08…), admin_shutdown, crash_shutdown,
            // cannot_connect_now, read_only_sql_transaction.
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "25006")
        }),
        _ => false,
    }
}

/// The writable primary among several hosts: which one it is, if known.
#[derive(Debug)]
pub(super) struct Primary {
    hosts: Vec<PgConnectOptions>,
    /// `host:port, host:port`, for messages.
    names: String,
    now: Mutex<Now>,
    /// Held by the one caller looking for the primary.
    looking: tokio::sync::Mutex<()>,
    /// The pool that follows it (its hooks hold this weakly).
    pool: OnceLock<PgPool>,
}

#[derive(Debug)]
struct Now {
    /// The index of the primary in `hosts`, or `None` while it is being looked for.
    at: Option<usize>,
    /// When the pool was last pointed at a host: a connection opened before is dropped.
    since: Instant,
}

impl Primary {
    fn new(hosts: Vec<PgConnectOptions>) -> Self {
        let names = hosts
            .iter()
            .map(|h| format!("{}:{}", h.get_host(), h.get_port()))
            .collect::<Vec<_>>()
            .join(", ");
        Self {
            hosts,
            names,
            now: Mutex::new(Now {
                at: None,
                since: Instant::now(),
            }),
            looking: tokio::sync::Mutex::new(()),
            pool: OnceLock::new(),
        }
    }

    fn now(&self) -> std::sync::MutexGuard<'_, Now> {
        self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn known(&self) -> bool {
        self.now().at.is_some()
    }

    /// The primary is gone: until it is found again the pool connects nowhere, so a
    /// caller already waiting for a connection is answered at once rather than retrying
    /// a dead host until the busy timeout.
    fn lost(&self) {
        self.now().at = None;
        if let Some(pool) = self.pool.get() {
            pool.set_connect_options(PgConnectOptions::new_without_pgpass().socket(NOWHERE));
        }
    }

    fn reconnecting(&self) -> StoreError {
        StoreError::Reconnecting {
            hosts: self.names.clone(),
        }
    }

    /// The first host, in the URL's order, that takes writes, with a connection to it.
    async fn find(&self) -> Option<(usize, PgConnection)> {
        for (i, options) in self.hosts.iter().enumerate() {
            let Ok(Ok(mut conn)) =
                tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await
            else {
                continue;
            };
            let writable: Option<bool> = tokio::time::timeout(
                CONNECT_TIMEOUT,
                sqlx::query_scalar(WRITABLE).fetch_one(&mut conn),
            )
            .await
            .ok()
            .and_then(|answer| answer.ok());
            if writable == Some(true) {
                return Some((i, conn));
            }
            let _ = conn.close().await;
        }
        None
    }

    /// Points `pool` at host `at` from now on.
    fn settle(&self, pool: &PgPool, at: usize) {
        pool.set_connect_options(self.hosts[at].clone());
        *self.now() = Now {
            at: Some(at),
            since: Instant::now(),
        };
    }

    async fn ready(&self, pool: &PgPool) -> Result<()> {
        if self.known() {
            return Ok(());
        }
        let Ok(_looking) = self.looking.try_lock() else {
            return Err(self.reconnecting());
        };
        // Another caller may have found it while this one waited for the lock.
        if self.known() {
            return Ok(());
        }
        let (at, conn) = self.find().await.ok_or_else(|| self.reconnecting())?;
        let _ = conn.close().await;
        self.settle(pool, at);
        Ok(())
    }

    /// Whether a pooled connection `age` old was opened to the current primary.
    fn fresh(&self, age: Duration) -> bool {
        let since = self.now().since;
        Instant::now()
            .checked_sub(age)
            .is_none_or(|opened| opened >= since)
    }
}

/// Connects to the primary among `hosts` (more than one) and makes the pool that follows
/// it: the connection found (for migrations), the pool, and the link its store uses.
pub(super) async fn follow(
    hosts: Vec<PgConnectOptions>,
    pool: PgPoolOptions,
    busy_timeout: Duration,
) -> Result<(PgConnection, PgPool, Link)> {
    let primary = Arc::new(Primary::new(hosts));
    let (at, conn) = primary.find().await.ok_or_else(|| primary.reconnecting())?;
    let (checked, kept) = (Arc::downgrade(&primary), Arc::downgrade(&primary));
    let pool = pool
        // A new connection must reach a primary: a host demoted since it was found is a
        // standby now, whose reads may be behind.
        .after_connect(move |conn, _| {
            let primary = Weak::clone(&checked);
            Box::pin(async move {
                let writable: bool = sqlx::query_scalar(WRITABLE).fetch_one(&mut *conn).await?;
                if !writable && let Some(primary) = primary.upgrade() {
                    primary.lost();
                }
                if writable {
                    Ok(())
                } else {
                    Err(sqlx::Error::Protocol(
                        "the host is no longer the primary".into(),
                    ))
                }
            })
        })
        // An idle connection is checked here rather than by the pool, so that one that
        // broke tells the primary is lost; one opened before the pool was pointed at the
        // current primary is dropped, not used.
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let primary = Weak::clone(&kept);
            Box::pin(async move {
                let Some(primary) = primary.upgrade() else {
                    return Ok(false);
                };
                if !primary.fresh(meta.age) {
                    return Ok(false);
                }
                if conn.ping().await.is_err() {
                    primary.lost();
                    return Ok(false);
                }
                Ok(true)
            })
        })
        .connect_lazy_with(primary.hosts[at].clone());
    let _ = primary.pool.set(pool.clone());
    primary.settle(&pool, at);
    Ok((
        conn,
        pool,
        Link {
            busy_timeout,
            primary: Some(primary),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_several_hosts_is_one_url_per_host() {
        assert_eq!(
            split(
                "postgres://baton:pw@10.0.0.1:5432,db2:6543/shop?target_session_attrs=read-write&sslmode=prefer"
            )
            .unwrap(),
            [
                "postgres://baton:pw@10.0.0.1:5432/shop?sslmode=prefer",
                "postgres://baton:pw@db2:6543/shop?sslmode=prefer",
            ]
        );
        assert_eq!(
            split("postgres://h1:1,[::1]:2/db").unwrap(),
            ["postgres://h1:1/db", "postgres://[::1]:2/db"]
        );
        assert_eq!(
            split("postgresql://h1,h2?target_session_attrs=primary").unwrap(),
            ["postgresql://h1", "postgresql://h2"]
        );
    }

    #[test]
    fn a_url_with_one_host_is_left_as_it_is() {
        for url in [
            "postgres://baton@db:5432/shop?schema=a&target_session_attrs=read-write",
            "postgres://db/shop",
            "postgres:///shop?host=/run/postgresql",
        ] {
            assert_eq!(split(url).unwrap(), [url]);
        }
    }

    #[test]
    fn an_unknown_parameter_or_target_is_refused_by_name_with_one_host_or_several() {
        for url in [
            "postgres://db/shop?sslmod=require",
            "postgres://h1,h2/shop?sslmode=require&sslmod=require",
        ] {
            let refused = split(url).unwrap_err();
            assert!(refused.contains("\"sslmod\""), "{refused}");
        }
        let refused = split("postgres://db/shop?target_session_attrs=standby").unwrap_err();
        assert!(
            refused.contains("target_session_attrs=standby")
                && refused.contains("target_session_attrs=read-write"),
            "{refused}"
        );
        // What is refused is named by a short prefix, not echoed whole.
        let long = "x".repeat(10_000);
        let refused = split(&format!("postgres://db/shop?{long}=1")).unwrap_err();
        assert!(refused.len() < 1000, "{} bytes", refused.len());
        for url in [
            "postgres://db/shop?schema=a&sslmode=disable&options[search_path]=x",
            "postgres://db/shop?target_session_attrs=primary&application_name=baton",
        ] {
            assert_eq!(split(url).unwrap(), [url]);
        }
    }

    #[test]
    fn an_ipv6_host_is_read_without_its_brackets() {
        for url in [
            "postgres://postgres@[::1]:5432/test",
            "postgres://postgres@[::1]/test",
        ] {
            let options: PgConnectOptions = url.parse().unwrap();
            let options = unbracket(options);
            assert_eq!(options.get_host(), "::1", "{url}");
        }
        let options: PgConnectOptions = "postgres://db.example:5433/x".parse().unwrap();
        assert_eq!(unbracket(options).get_host(), "db.example");
    }

    #[test]
    fn several_hosts_are_refused_when_asked_for_a_standby_or_an_empty_host() {
        let refused = split("postgres://h1,h2/db?target_session_attrs=read-only").unwrap_err();
        assert!(
            refused.contains("target_session_attrs=read-write"),
            "{refused}"
        );
        assert!(
            split("postgres://h1,,h2/db")
                .unwrap_err()
                .contains("empty host")
        );
    }
}
