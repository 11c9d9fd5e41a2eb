//! A PostgreSQL cluster with synchronous replication and automatic failover, for the
//! failover tests: a `pg_auto_failover` monitor and two data nodes on free loopback ports,
//! created and run by `pg_autoctl` in a directory of their own in the temporary directory
//! (as Debian's `postgres` account when the tests run as root: PostgreSQL and
//! `pg_autoctl` refuse root). Dropping a [`Formation`] stops every process it started and
//! removes its directory.
//!
//! Where `pg_autoctl` is not installed the failover tests are not compiled to run:
//! [`crate::build_script`] sets `cfg(baton_test_failover)` only when it is found.

use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{Result, free_port, run};

/// Why a failover test is ignored: the attribute's reason, said once here.
pub const IGNORED: &str = "pg_auto_failover not found: apt-get install postgresql-15-auto-failover";

/// The database the data nodes serve.
pub const DATABASE: &str = "baton";

/// The role a client connects as: the data nodes' superuser, trusted on loopback. The
/// URI `pg_autoctl show uri` prints names no user; clients set `PGUSER` to this.
pub const USER: &str = "postgres";

/// How long the formation may take to have a primary and a secondary.
const READY: Duration = Duration::from_secs(120);

/// `pg_autoctl`: on `PATH`, or where Debian's package puts it.
pub fn autoctl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("pg_autoctl"))
        .find(|p| p.is_file())
}

/// A data node: its name, loopback port and data directory.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub port: u16,
    pgdata: PathBuf,
}

/// A node's state as the monitor holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub port: u16,
    pub reported: String,
    pub assigned: String,
}

/// A running monitor and two data nodes; see the module's documentation.
pub struct Formation {
    dir: PathBuf,
    bin: PathBuf,
    autoctl: PathBuf,
    runs_as: Option<(String, u32)>,
    monitor_port: u16,
    nodes: Vec<Node>,
    children: Vec<Child>,
    uri: String,
    /// The postmaster [`Self::kill_primary`] killed last.
    killed: Cell<Option<u32>>,
}

impl Formation {
    /// Creates and starts a formation, and waits until it has a primary and a synchronous
    /// secondary.
    ///
    /// # Panics
    ///
    /// When `pg_autoctl` or PostgreSQL's binaries are missing, or the formation does not
    /// come up; the message names the logs.
    pub fn start() -> Self {
        let autoctl = autoctl().unwrap_or_else(|| panic!("{IGNORED}"));
        let bin = crate::binaries().unwrap_or_else(|| panic!("{}", crate::IGNORED));
        // pg_autoctl finds PostgreSQL's other programs beside `pg_ctl`: the directory it
        // is in, not one holding a link to it.
        let bin = fs::canonicalize(bin.join("pg_ctl"))
            .ok()
            .and_then(|p| p.parent().map(PathBuf::from))
            .unwrap_or(bin);
        let runs_as = crate::account().unwrap_or_else(|e| panic!("{e}"));
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("baton-formation-{}-{stamp:x}", std::process::id()));
        let mut formation = Self {
            dir,
            bin,
            autoctl,
            runs_as,
            monitor_port: 0,
            nodes: Vec::new(),
            children: Vec::new(),
            uri: String::new(),
            killed: Cell::new(None),
        };
        if let Err(e) = formation.create() {
            panic!("the failover formation in {}: {e}", formation.dir.display());
        }
        formation
    }

    fn create(&mut self) -> Result<()> {
        // pg_autoctl keeps each node's files under `XDG_…/pg_autoctl/PGDATA`; three
        // processes creating those directories at once trip over each other, so they are
        // made here first.
        let mut dirs = vec![self.dir.clone()];
        let inner = self
            .dir
            .strip_prefix("/")
            .unwrap_or(&self.dir)
            .to_path_buf();
        for sub in ["config", "data", "run"] {
            for name in ["monitor", "node1", "node2"] {
                let mut path = self.dir.join(sub);
                for part in Path::new("pg_autoctl").join(&inner).join(name).components() {
                    dirs.push(path.clone());
                    path.push(part);
                }
                dirs.push(path);
            }
        }
        for path in &dirs {
            fs::create_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some((_, uid)) = &self.runs_as {
                std::os::unix::fs::chown(path, Some(*uid), None)
                    .map_err(|e| format!("handing {} to uid {uid}: {e}", path.display()))?;
            }
        }
        let pg_ctl = self.bin.join("pg_ctl");
        let pg_ctl = pg_ctl.to_string_lossy().into_owned();
        self.monitor_port = port()?;
        let monitor_port = self.monitor_port.to_string();
        let monitor = self.dir.join("monitor").to_string_lossy().into_owned();
        self.spawn(
            "monitor",
            &[
                "create",
                "monitor",
                "--pgdata",
                &monitor,
                "--pgport",
                &monitor_port,
                "--listen",
                "127.0.0.1",
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--pgctl",
                &pg_ctl,
                "--run",
            ],
        )?;
        let monitor_uri = format!(
            "postgres://autoctl_node@127.0.0.1:{monitor_port}/pg_auto_failover?sslmode=disable"
        );
        // Both nodes at once, each waiting for the monitor: the first to register is the
        // primary, the other its standby.
        for n in 1..=2 {
            let name = format!("node{n}");
            let node = Node {
                port: port()?,
                pgdata: self.dir.join(&name),
                name,
            };
            let pgdata = node.pgdata.to_string_lossy().into_owned();
            self.spawn(
                &node.name,
                &[
                    "create",
                    "postgres",
                    "--pgdata",
                    &pgdata,
                    "--pgport",
                    &node.port.to_string(),
                    "--listen",
                    "127.0.0.1",
                    "--hostname",
                    "127.0.0.1",
                    "--auth",
                    "trust",
                    "--no-ssl",
                    "--pgctl",
                    &pg_ctl,
                    "--monitor",
                    &monitor_uri,
                    "--dbname",
                    DATABASE,
                    "--name",
                    &node.name,
                    "--run",
                ],
            )?;
            self.nodes.push(node);
        }
        self.wait_for(READY, |states| {
            states.iter().any(|s| s.is("primary")) && states.iter().any(|s| s.is("secondary"))
        })?;
        let shown = run(&mut self.autoctl(&[
            "show",
            "uri",
            "--pgdata",
            &monitor,
            "--formation",
            "default",
        ]))?;
        self.uri = shown.trim().to_owned();
        Ok(())
    }

    /// The multi-host URI of the formation, as `pg_autoctl show uri` prints it
    /// (`postgres://127.0.0.1:P1,127.0.0.1:P2/baton?target_session_attrs=read-write…`).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The data nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Each data node's state as the monitor holds it; empty when the monitor cannot be
    /// asked.
    pub fn states(&self) -> Vec<NodeState> {
        let asked = self.psql(
            self.monitor_port,
            "autoctl_node",
            "pg_auto_failover",
            "SELECT nodeport, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid",
        );
        asked
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('|');
                Some(NodeState {
                    port: fields.next()?.parse().ok()?,
                    reported: fields.next()?.to_owned(),
                    assigned: fields.next()?.to_owned(),
                })
            })
            .collect()
    }

    /// The port of the node the monitor holds as primary (reported and assigned).
    pub fn primary(&self) -> Option<u16> {
        self.states()
            .into_iter()
            .find(|s| s.is("primary"))
            .map(|s| s.port)
    }

    /// The process id of the postmaster of the node on `port`, from its `postmaster.pid`.
    pub fn postmaster(&self, port: u16) -> Option<u32> {
        let node = self.nodes.iter().find(|n| n.port == port)?;
        let pid = fs::read_to_string(node.pgdata.join("postmaster.pid")).ok()?;
        pid.lines().next()?.trim().parse().ok()
    }

    /// Sends SIGKILL to the primary's postmaster; returns the primary's port.
    ///
    /// # Panics
    ///
    /// When there is no primary, or the signal cannot be sent.
    pub fn kill_primary(&self) -> u16 {
        let port = self.primary().expect("a primary to kill");
        let pid = self.postmaster(port).expect("the primary's postmaster.pid");
        kill(pid);
        self.killed.set(Some(pid));
        port
    }

    /// After [`Self::kill_primary`] killed the postmaster of the primary on `port`: waits
    /// until the monitor starts a failover, and returns how many times the postmaster was
    /// killed. pg_auto_failover's keeper restarts a killed postmaster where it was; when
    /// the restart wins the race with the keeper's report, the monitor never hears of it
    /// and keeps the primary, so a postmaster back for two seconds with the monitor none
    /// the wiser is killed again.
    ///
    /// # Panics
    ///
    /// When no failover starts within a minute.
    pub fn until_failover(&self, port: u16) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut kills = 1;
        let mut last = self.killed.get();
        let mut back_since: Option<Instant> = None;
        loop {
            let states = self.states();
            if states
                .iter()
                .any(|s| s.port == port && s.assigned != "primary")
            {
                return kills;
            }
            assert!(
                Instant::now() < deadline,
                "no failover in a minute: {states:?}"
            );
            let back = self
                .postmaster(port)
                .filter(|pid| Some(*pid) != last && alive(*pid));
            match (back, back_since) {
                (Some(_), None) => back_since = Some(Instant::now()),
                (Some(pid), Some(since)) if since.elapsed() > Duration::from_secs(2) => {
                    kill(pid);
                    kills += 1;
                    last = Some(pid);
                    back_since = None;
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the monitor's states satisfy `done`, or `timeout` passes.
    ///
    /// # Errors
    ///
    /// At the timeout, with the states last seen.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&[NodeState]) -> bool) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last_checkpoint = Instant::now();
        loop {
            let states = self.states();
            if done(&states) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the formation did not settle in {timeout:?}: {states:?}; logs in {}",
                    self.dir.display()
                ));
            }
            // A new standby's base backup starts with a checkpoint, spread over minutes
            // unless someone asks for one now.
            if last_checkpoint.elapsed() > Duration::from_secs(1) {
                for node in &self.nodes {
                    let _ = self.psql(node.port, USER, DATABASE, "CHECKPOINT");
                }
                last_checkpoint = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `sql`'s rows, one a line, fields split by `|`.
    fn psql(&self, port: u16, user: &str, database: &str, sql: &str) -> Result<String> {
        run(Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-q", "-h", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .args(["-U", user, "-d", database, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "2")
            .stdin(Stdio::null()))
    }

    /// `pg_autoctl ARGS`, as the formation's owner, with its files in the formation's
    /// directory.
    fn autoctl(&self, args: &[&str]) -> Command {
        let vars = [
            ("XDG_CONFIG_HOME", self.dir.join("config")),
            ("XDG_DATA_HOME", self.dir.join("data")),
            ("XDG_RUNTIME_DIR", self.dir.join("run")),
        ];
        let mut command = match &self.runs_as {
            None => {
                let mut command = Command::new(&self.autoctl);
                command.envs(vars);
                command
            }
            // `runuser` resets the environment; `env` sets it again for pg_autoctl.
            Some((account, _)) => {
                let mut command = Command::new("runuser");
                command.args(["-u", account, "--", "env"]);
                for (name, value) in vars {
                    command.arg(format!("{name}={}", value.display()));
                }
                command.arg(&self.autoctl);
                command
            }
        };
        command.args(args).stdin(Stdio::null());
        command
    }

    /// Starts `pg_autoctl ARGS` in the background, its output in `NAME.log`.
    fn spawn(&mut self, name: &str, args: &[&str]) -> Result<()> {
        let log_path = self.dir.join(format!("{name}.log"));
        let log =
            fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = self
            .autoctl(args)
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("pg_autoctl {args:?}: {e}"))?;
        self.children.push(child);
        Ok(())
    }

    /// Every process of the formation: each inherits the `XDG_CONFIG_HOME` it was started
    /// with (pg_autoctl renames its own processes, so their command lines may not name the
    /// directory; PostgreSQL's do).
    fn processes(&self) -> Vec<u32> {
        let marker = format!("XDG_CONFIG_HOME={}", self.dir.join("config").display());
        let dir = self.dir.to_string_lossy().into_owned();
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| {
                let e = e.ok()?;
                let pid: u32 = e.file_name().to_str()?.parse().ok()?;
                let ours = |file: &str, needle: &str| {
                    fs::read(e.path().join(file)).is_ok_and(|bytes| {
                        bytes
                            .split(|b| *b == 0)
                            .any(|part| String::from_utf8_lossy(part).contains(needle))
                    })
                };
                (ours("environ", &marker) || ours("cmdline", &dir)).then_some(pid)
            })
            .filter(|pid| *pid != std::process::id())
            .collect()
    }
}

impl NodeState {
    /// Whether the node reports `state` and is assigned it: settled there.
    pub fn is(&self, state: &str) -> bool {
        self.reported == state && self.assigned == state
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        // Nothing here is kept: every process is killed at once, without a clean stop.
        signal("KILL", &self.processes());
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // A postmaster's children leave soon after it; until then they may write files.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.processes().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if std::thread::panicking() {
            eprintln!("the failover formation's logs: {}", self.dir.display());
            return;
        }
        while fs::remove_dir_all(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Sends SIGKILL to `pid`.
fn kill(pid: u32) {
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success(), "kill -KILL {pid}");
}

/// Whether process `pid` runs (exists, and is not a zombie waiting for its parent).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

fn signal(name: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .stderr(Stdio::null())
        .status();
}

fn port() -> Result<u16> {
    free_port()?
        .parse()
        .map_err(|e| format!("a free port: {e}"))
}
