//! Databases: projects by name, a directory of SQLite files or one PostgreSQL database
//! (its hosts, its parameters, and openers migrating it at once).

use baton_core::{ProjectName, Record, Refusal};
use baton_store::{DEFAULT_BUSY_TIMEOUT, Database, PostgresDatabase, StoreError};

use crate::{Schema, cast, generation};

/// Story 20: A database holds projects by name; each is a store of its own, and a project
/// that does not exist is not found (never created by opening it).
async fn a_database_holds_projects_by_name(db: &dyn Database) {
    let shop = ProjectName::new("shop").unwrap();
    let docs = ProjectName::new("docs").unwrap();
    let err = db.project(&shop).await.err().expect("no project yet");
    assert!(
        matches!(
            err,
            StoreError::Refused(Refusal::NotFound {
                record: Record::Project,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(db.add_project(&shop).await.unwrap());
    assert!(
        !db.add_project(&shop).await.unwrap(),
        "adding it again is harmless"
    );
    assert!(db.add_project(&docs).await.unwrap());
    assert_eq!(db.projects().await.unwrap(), [docs.clone(), shop.clone()]);
    // Each project's log is its own.
    let store = db.project(&shop).await.unwrap();
    cast(&store).await;
    assert!(generation(&store).await > 0);
    let other = db.project(&docs).await.unwrap();
    assert_eq!(generation(&other).await, 0);
    assert!(other.participants().await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_a_directory_holds_projects_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = baton_store::database(
        &format!("sqlite:{}", dir.path().join("projects").display()),
        DEFAULT_BUSY_TIMEOUT,
    )
    .await
    .unwrap();
    a_database_holds_projects_by_name(db.as_ref()).await;
}

#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_a_database_holds_projects_by_name() {
    let schema = Schema::new();
    let db = baton_store::database(&schema.url(), DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", schema.base));
    a_database_holds_projects_by_name(db.as_ref()).await;
}

/// A URL whose host is an IPv6 address reaches the database (sqlx keeps the brackets,
/// which no resolver reads): here through a forwarder on `[::1]` to the test database.
/// A URL parameter nobody reads, or a `target_session_attrs` asking for a standby, is
/// refused by name, with one host as with several.
#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_an_ipv6_host_is_reached_and_unknown_parameters_are_refused() {
    let schema = Schema::new();
    let url = schema.url();
    let (scheme, rest) = url.split_once("://").unwrap();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, target) = match authority.rsplit_once('@') {
        Some((user, host)) => (format!("{user}@"), host.to_owned()),
        None => (String::new(), authority.to_owned()),
    };
    let target = if target.contains(':') {
        target
    } else {
        format!("{target}:5432")
    };
    let listener = tokio::net::TcpListener::bind("[::1]:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let v6 = format!("{scheme}://{user}[::1]:{port}{tail}");
    let db = baton_store::database(&v6, DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{v6}: {e}"));
    a_database_holds_projects_by_name(db.as_ref()).await;

    for (extra, named) in [
        ("sslmod=require", "\"sslmod\""),
        (
            "target_session_attrs=standby",
            "target_session_attrs=standby",
        ),
    ] {
        let refused = baton_store::database(&format!("{url}&{extra}"), DEFAULT_BUSY_TIMEOUT)
            .await
            .err()
            .expect("refused");
        assert!(refused.to_string().contains(named), "{refused}");
    }
}

/// Four openers of a new database at once all find it migrated: each waits for the one
/// ahead of it under the migration lock, then finds the work done.
#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_openers_at_once_all_find_one_schema_migrated() {
    let schema = Schema::new();
    let url = schema.url();
    let open = || PostgresDatabase::connect(&url, DEFAULT_BUSY_TIMEOUT);
    let opened = tokio::join!(open(), open(), open(), open());
    for db in [opened.0, opened.1, opened.2, opened.3] {
        let db = db.expect("a migrated database");
        assert!(db.projects().await.unwrap().is_empty());
    }
}
