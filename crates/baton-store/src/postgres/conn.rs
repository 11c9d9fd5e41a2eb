//! Connections to the database: a URL split into what sqlx reads and Baton's own `schema`,
//! where a database is said in messages (never with its password), the pool reached once
//! it reaches the primary (`hosts.rs`), a write transaction behind the project's row lock
//! with its lock waits bounded, and a read of one snapshot.

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{AssertSqlSafe, Postgres, Transaction};
use std::time::Duration;

use super::{PostgresStore, hosts};
use crate::{Result, StoreError};
use baton_core::{Record, Refusal};

/// Splits Baton's own `schema` parameter off the URL; the rest is sqlx's to read.
pub(super) fn parse_url(url: &str) -> Result<(PgConnectOptions, Option<String>)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut schema = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("schema=") {
            Some(name) => schema = Some(name.to_owned()),
            None => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    let options: PgConnectOptions =
        url.parse()
            .map_err(|e: sqlx::Error| StoreError::Unavailable {
                path: redact(base),
                reason: e.to_string(),
            })?;
    let options = hosts::unbracket(options);
    if let Some(name) = &schema {
        let plain = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain {
            return Err(StoreError::Unavailable {
                path: redact(base),
                reason: format!(
                    "schema {name:?} is not a plain SQL name: use a-z, 0-9 and _, \
                     starting with a letter or _, at most 63 characters"
                ),
            });
        }
    }
    Ok((options, schema))
}

/// The URL with its password (if any) hidden, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
        }
        _ => url.to_owned(),
    }
}

/// Where a database is, for messages: never its password.
pub(super) fn place(options: &PgConnectOptions, schema: Option<&str>) -> String {
    let mut place = format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    if let Some(schema) = schema {
        place.push_str("?schema=");
        place.push_str(schema);
    }
    place
}

/// The statement that opens a write transaction: lock waits end at the busy timeout.
/// `SET` takes no bound parameters; the value is a number computed here (at least 1 ms,
/// because 0 would mean waiting forever).
pub(super) fn begin_bounded(busy_timeout: Duration) -> String {
    let ms = busy_timeout.as_millis().max(1);
    format!("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {ms}")
}

impl PostgresStore {
    /// The options the store connects with (its schema included): for tools and tests
    /// that must reach under the store on a connection of their own.
    pub fn connect_options(&self) -> PgConnectOptions {
        (*self.pool.connect_options()).clone()
    }

    pub(super) fn err(&self, e: sqlx::Error) -> StoreError {
        self.link.classify(&e)
    }

    /// The pool, once it reaches the primary.
    pub(super) async fn pool(&self) -> Result<&PgPool> {
        self.link.ready(&self.pool).await
    }

    /// A connection of the pool, once it reaches the primary.
    pub(super) async fn conn(&self) -> Result<PoolConnection<Postgres>> {
        self.pool().await?.acquire().await.map_err(|e| self.err(e))
    }

    /// Starts a write transaction holding the project's write lock, waiting at most the
    /// busy timeout for it.
    pub(super) async fn write(&self) -> Result<Transaction<'static, Postgres>> {
        let mut tx = self
            .pool()
            .await?
            .begin_with(AssertSqlSafe(begin_bounded(self.link.busy_timeout)))
            .await
            .map_err(|e| self.err(e))?;
        let locked: Option<i64> =
            sqlx::query_scalar("SELECT id FROM projects WHERE id = $1 FOR UPDATE")
                .bind(self.project)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        if locked.is_none() {
            return Err(Refusal::not_found(Record::Project, self.name.as_str()).into());
        }
        Ok(tx)
    }

    /// Starts a read that sees one snapshot across its queries; end it with [`Self::done`].
    pub(super) async fn snapshot(&self) -> Result<Transaction<'static, Postgres>> {
        self.pool()
            .await?
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| self.err(e))
    }

    /// Ends a snapshot read, handing back what it read.
    pub(super) async fn done<T>(
        &self,
        tx: Transaction<'static, Postgres>,
        read: sqlx::Result<T>,
    ) -> Result<T> {
        let value = read.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_keeps_its_libpq_parameters_and_names_a_plain_schema() {
        let (options, schema) =
            parse_url("postgres://baton@db.example:5433/shared?schema=team_a&sslmode=disable")
                .unwrap();
        assert_eq!(schema.as_deref(), Some("team_a"));
        assert_eq!(
            place(&options, schema.as_deref()),
            "postgres://baton@db.example:5433/shared?schema=team_a"
        );
        for bad in ["Team", "1a", "a-b", "a;drop", ""] {
            let err = parse_url(&format!("postgres://u@h/db?schema={bad}")).unwrap_err();
            assert!(err.to_string().contains("plain SQL name"), "{bad}: {err}");
        }
    }

    #[test]
    fn messages_never_show_a_password() {
        assert_eq!(
            redact("postgres://baton:s3cret@db:5432/x?schema=a"),
            "postgres://baton:***@db:5432/x?schema=a"
        );
        assert_eq!(redact("postgres://baton@db/x"), "postgres://baton@db/x");
        let (options, _) = parse_url("postgres://baton:s3cret@db/x").unwrap();
        assert!(!place(&options, None).contains("s3cret"));
    }

    #[test]
    fn lock_waits_are_bounded_and_never_unbounded() {
        assert!(begin_bounded(Duration::from_millis(200)).ends_with("lock_timeout = 200"));
        assert!(begin_bounded(Duration::ZERO).ends_with("lock_timeout = 1"));
    }
}
