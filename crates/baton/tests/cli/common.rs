//! A throwaway project and a way to run `baton` in it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The exit code of a process that exited (a signal is a test failure here).
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The crash harness's generator: kill moments that differ per trial, without a dependency.
pub use baton_crash::XorShift;

/// The shared Work Order (`baton-core/tests/fixtures/work-order.json`): from the planner
/// to impl-1, passing every rule and the `x-baton` contract, under the id `id`.
pub fn work_order(id: &str) -> serde_json::Value {
    let mut order: serde_json::Value = serde_json::from_str(include_str!(
        "../../../baton-core/tests/fixtures/work-order.json"
    ))
    .expect("the fixture is JSON");
    order["id"] = id.into();
    order
}

/// The shared Work Report (`baton-core/tests/fixtures/work-report.json`): impl-1's `done`
/// report, with its evidence, on the order `order_id`.
pub fn work_report(order_id: &str) -> serde_json::Value {
    let mut report: serde_json::Value = serde_json::from_str(include_str!(
        "../../../baton-core/tests/fixtures/work-report.json"
    ))
    .expect("the fixture is JSON");
    report["order_id"] = order_id.into();
    report
}

/// The test PostgreSQL's URL, in a schema of its own named `schema` (tests run at once,
/// so each names its own).
pub fn postgres_schema(schema: &str) -> String {
    let base = baton_testdb::url();
    let separator = if base.contains('?') { '&' } else { '?' };
    format!("{base}{separator}schema={schema}")
}

/// Drops the schema [`postgres_schema`] named, with all it holds (best effort).
pub fn drop_postgres_schema(schema: &str) {
    let _ = Command::new("psql")
        .args([
            &baton_testdb::url(),
            "-c",
            &format!("DROP SCHEMA {schema} CASCADE"),
        ])
        .output();
}

pub fn baton_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_baton"))
}

/// A project in a temporary directory, removed on drop.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// `baton init` plus the given participants, as `(name, role)`.
    pub fn new(participants: &[(&str, &str)]) -> Self {
        let project = Self {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        project.ok(None, &["init"]);
        for (name, role) in participants {
            project.ok(None, &["agent", "add", name, "--role", role]);
        }
        project
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.path().join(".baton/baton.db")
    }

    /// A `baton` command in this project, as `who` when given.
    pub fn cmd(&self, who: Option<&str>, args: &[&str]) -> Command {
        let mut cmd = Command::new(baton_exe());
        cmd.current_dir(self.path())
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS");
        if let Some(who) = who {
            cmd.args(["--as", who]);
        }
        cmd.args(args);
        cmd
    }

    pub fn run(&self, who: Option<&str>, args: &[&str]) -> Output {
        self.cmd(who, args).output().expect("run baton")
    }

    /// Runs and insists on success; returns trimmed stdout.
    pub fn ok(&self, who: Option<&str>, args: &[&str]) -> String {
        let out = self.run(who, args);
        assert!(
            out.status.success(),
            "baton {args:?} as {who:?} failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    }

    /// Sets a setting in `.baton/config.toml`: the line `from` (which must be there, as
    /// `init` wrote it) becomes `to`.
    pub fn configure(&self, from: &str, to: &str) {
        let config = self.path().join(".baton/config.toml");
        let text = std::fs::read_to_string(&config).expect("the project's config");
        assert!(text.contains(from), "no `{from}` in:\n{text}");
        std::fs::write(&config, text.replace(from, to)).expect("write the config");
    }

    /// The store's generation (the newest event's seq), read from the store directly.
    pub fn generation(&self) -> i64 {
        use baton_store::Backend;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            baton_store::SqliteStore::open(&self.db(), std::time::Duration::from_secs(5))
                .await
                .expect("open the store")
                .generation()
                .await
                .expect("read the generation")
        })
    }

    /// Runs with `--json` and parses stdout.
    pub fn json(&self, who: Option<&str>, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(who, &all)).expect("JSON output")
    }
}

/// Reads a waiter's stderr (piped) up to the line a blocking wait prints once its first
/// look found nothing ("waiting for …"), and returns the lines before it. Whatever is written
/// after this returns can only reach the waiter by waking it. Panics when the waiter
/// closes stderr first (it finished without ever waiting) or says nothing for a minute.
/// Reads a byte at a time, so the rest of stderr stays in the pipe for `wait_with_output`.
pub fn until_waiting(child: &mut Child) -> String {
    let mut pipe = child.stderr.take().expect("the waiter's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut before = String::new();
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        let said = loop {
            match pipe.read(&mut byte) {
                Ok(0) | Err(_) => break false,
                Ok(_) if byte[0] == b'\n' => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    if text.starts_with("waiting for ") {
                        break true;
                    }
                    before.push_str(&text);
                    before.push('\n');
                    line.clear();
                }
                Ok(_) => line.push(byte[0]),
            }
        };
        let _ = tx.send((said, before, pipe));
    });
    let (said, before, pipe) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the waiter never said it waits");
    assert!(said, "the waiter ended without waiting; it said: {before}");
    child.stderr = Some(pipe);
    before
}

/// The processes that have `db` open (its `-shm` mapped or the file itself open).
pub fn opened(child: &Child, db: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", child.id())) else {
        return false;
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .any(|target| target.starts_with(db))
}

/// Runs `args` as each of `names` at once, every process queued behind a write lock this
/// test holds until all of them have opened the store: a forced interleaving, so all of
/// them read before any writes.
pub fn queued(p: &Project, names: &[String], args: &[&str]) -> Vec<Output> {
    let db = p.db();
    let lock = rusqlite::Connection::open(&db).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut children: Vec<Child> = names
        .iter()
        .map(|who| {
            p.cmd(Some(who), args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !children.iter().all(|c| opened(c, &db)) {
        assert!(
            children.iter_mut().all(|c| c.try_wait().unwrap().is_none()),
            "a process finished while the write lock was held"
        );
        assert!(
            Instant::now() < deadline,
            "the processes never opened the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    lock.execute_batch("ROLLBACK").unwrap();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}
