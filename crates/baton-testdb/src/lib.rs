//! The PostgreSQL database Baton's tests run on.
//!
//! `BATON_TEST_POSTGRES`, when set, names it. Otherwise, where PostgreSQL's server
//! binaries are installed (`initdb`, `pg_ctl`: on `PATH`, in `BATON_TEST_POSTGRES_BIN`, or
//! Debian's `/usr/lib/postgresql/N/bin`), the first test that asks starts a throwaway
//! cluster of the tests' own in the temporary directory, on a free loopback port, and
//! every later test (each process of a run, and later runs) reuses it. It is left running:
//! no test knows it is the last, and the next run starts in milliseconds instead of
//! seconds. Removing its directory after stopping it (`pg_ctl stop -D DIR`) is safe.
//!
//! Where neither is there, the PostgreSQL tests are not compiled to run: each crate's
//! build script calls [`build_script`], which sets `cfg(baton_test_postgres)` only when a
//! database can be had, and those tests carry
//! `#[cfg_attr(not(baton_test_postgres), ignore = "…")]`, so `cargo test` lists them as
//! ignored, with the reason, rather than as passed.
//!
//! The failover tests run on a cluster of their own with automatic failover
//! ([`formation`]), where `pg_autoctl` is installed: `cfg(baton_test_failover)`.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};

pub mod formation;

/// The variable naming a database the tests use instead of a cluster of their own.
pub const URL_VAR: &str = "BATON_TEST_POSTGRES";

/// The variable naming the directory of `initdb` and `pg_ctl`.
pub const BIN_VAR: &str = "BATON_TEST_POSTGRES_BIN";

/// Why a PostgreSQL test is ignored: the attribute's reason, said once here.
pub const IGNORED: &str =
    "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES";

/// For a crate's `build.rs`: declares `cfg(baton_test_postgres)` and sets it when
/// `BATON_TEST_POSTGRES` is set or PostgreSQL's server binaries are found.
pub fn build_script() {
    println!("cargo::rustc-check-cfg=cfg(baton_test_postgres)");
    println!("cargo::rustc-check-cfg=cfg(baton_test_failover)");
    println!("cargo::rerun-if-env-changed={URL_VAR}");
    println!("cargo::rerun-if-env-changed={BIN_VAR}");
    // Installing PostgreSQL later changes this directory: the cfg is decided again.
    // (Watching a path that does not exist would run the script on every build.)
    if Path::new(DEBIAN).exists() {
        println!("cargo::rerun-if-changed={DEBIAN}");
    }
    if std::env::var_os(URL_VAR).is_some() || binaries().is_some() {
        println!("cargo::rustc-cfg=baton_test_postgres");
    }
    // pg_auto_failover's package also adds its extension under DEBIAN, watched above.
    if binaries().is_some() && formation::autoctl().is_some() {
        println!("cargo::rustc-cfg=baton_test_failover");
    }
}

/// The base URL of a database the tests may create schemas in: `BATON_TEST_POSTGRES`, or
/// the tests' own cluster, started if it is not running.
///
/// # Panics
///
/// When neither can be had, or the cluster does not start; the message says why and
/// names the cluster's log.
pub fn url() -> String {
    if let Ok(url) = std::env::var(URL_VAR) {
        return url;
    }
    let bin = binaries().unwrap_or_else(|| panic!("{IGNORED}"));
    match Cluster::new(bin).and_then(|c| c.running()) {
        Ok(url) => url,
        Err(e) => panic!("the tests' PostgreSQL cluster: {e}"),
    }
}

/// Where Debian installs each major version's server binaries.
const DEBIAN: &str = "/usr/lib/postgresql";

/// The directory holding `initdb` and `pg_ctl`: `BATON_TEST_POSTGRES_BIN`, `PATH`, or the
/// newest of Debian's.
fn binaries() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os(BIN_VAR) {
        return Some(PathBuf::from(dir)).filter(|d| has(d));
    }
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|d| has(d))
    {
        return Some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(DEBIAN)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let major = e.file_name().to_str()?.parse().ok()?;
            Some((major, e.path().join("bin")))
        })
        .filter(|(_, dir)| has(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// The tests' own cluster: one directory per user and major version.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    /// The account the server runs as when the tests run as root (PostgreSQL refuses
    /// root): Debian's `postgres`, else `nobody`.
    runs_as: Option<(String, u32)>,
}

type Result<T> = std::result::Result<T, String>;

impl Cluster {
    fn new(bin: PathBuf) -> Result<Self> {
        let version = run(Command::new(bin.join("pg_ctl")).arg("--version"))?;
        // "pg_ctl (PostgreSQL) 15.19 (Debian 15.19-0+deb12u1)"
        let major = version
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.split('.').next())
            .ok_or_else(|| format!("pg_ctl --version said {version:?}"))?
            .to_owned();
        let uid = fs::metadata("/proc/self")
            .map(|m| m.uid())
            .map_err(|e| format!("/proc/self: {e}"))?;
        let runs_as = account()?;
        let dir = std::env::temp_dir().join(format!("baton-postgres-{uid}-{major}"));
        Ok(Self { bin, dir, runs_as })
    }

    /// The cluster's URL, once it is created and accepting connections. Concurrent test
    /// processes take turns on a lock file beside the directory.
    fn running(&self) -> Result<String> {
        let lock_path = self.dir.with_extension("lock");
        let lock = File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
        lock.lock()
            .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
        if !self.dir.join("PG_VERSION").exists() {
            self.create()?;
        }
        let port_file = self.dir.join("baton-port");
        let running = self.as_owner("pg_ctl", &["status"]).status.success();
        let port = match fs::read_to_string(&port_file) {
            Ok(port) if running => port.trim().to_owned(),
            _ => {
                let port = free_port()?;
                fs::write(&port_file, &port)
                    .map_err(|e| format!("{}: {e}", port_file.display()))?;
                self.start(&port)?;
                port
            }
        };
        Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"))
    }

    fn create(&self) -> Result<()> {
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(format!("removing {}: {e}", self.dir.display()));
            }
            _ => {}
        }
        fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        if let Some((_, uid)) = &self.runs_as {
            std::os::unix::fs::chown(&self.dir, Some(*uid), None)
                .map_err(|e| format!("handing {} to uid {uid}: {e}", self.dir.display()))?;
        }
        let initdb = self.as_owner(
            "initdb",
            &[
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "--encoding=UTF8",
                "--locale=C",
            ],
        );
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr)
            ));
        }
        Ok(())
    }

    fn start(&self, port: &str) -> Result<()> {
        let log = self.dir.join("log");
        // Loopback only, its socket in its own directory, and no fsync: a cluster for
        // tests, whose data nobody keeps.
        let options = format!(
            "-p {port} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
            dir = self.dir.display()
        );
        let log_path = log.to_string_lossy();
        let started = self.as_owner(
            "pg_ctl",
            &["start", "-w", "-t", "60", "-o", &options, "-l", &log_path],
        );
        if !started.status.success() {
            return Err(format!(
                "pg_ctl start failed ({}): {}; its log: {}",
                started.status,
                String::from_utf8_lossy(&started.stdout).trim(),
                log.display()
            ));
        }
        Ok(())
    }

    /// Runs `program` of the cluster's binaries on its directory, as the cluster's owner
    /// (through `runuser` when the tests are root).
    fn as_owner(&self, program: &str, args: &[&str]) -> Output {
        let program = self.bin.join(program);
        let mut command = match &self.runs_as {
            None => Command::new(&program),
            Some((account, _)) => {
                let mut runuser = Command::new("runuser");
                runuser.args(["-u", account, "--"]).arg(&program);
                runuser
            }
        };
        command.arg("-D").arg(&self.dir).args(args);
        // The server `pg_ctl` starts must not hold the test's pipes open.
        command.stdin(Stdio::null());
        command.output().unwrap_or_else(|e| Output {
            status: ExitStatus::from_raw(127 << 8),
            stdout: Vec::new(),
            stderr: format!("{}: {e}", program.display()).into_bytes(),
        })
    }
}

/// The account PostgreSQL runs as when the tests run as root (PostgreSQL refuses root):
/// Debian's `postgres`, else `nobody`; `None` when the tests are not root.
fn account() -> Result<Option<(String, u32)>> {
    let uid = fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| format!("/proc/self: {e}"))?;
    if uid != 0 {
        return Ok(None);
    }
    let account = ["postgres", "nobody"]
        .into_iter()
        .find_map(|name| {
            let id = run(Command::new("id").args(["-u", name])).ok()?;
            Some((name.to_owned(), id.trim().parse().ok()?))
        })
        .ok_or("running as root, and neither a postgres nor a nobody account exists")?;
    Ok(Some(account))
}

/// A loopback port nothing listens on now.
fn free_port() -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("a free port: {e}"))?
        .port();
    Ok(port.to_string())
}

/// `command`'s stdout, or why it failed.
fn run(command: &mut Command) -> Result<String> {
    let output = command
        .output()
        .map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    if !output.status.success() {
        return Err(format!(
            "{:?} failed: {}",
            command.get_program(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
