//! Real processes: `baton` run to completion, and a loop of `baton` commands killed with
//! SIGKILL, process group and all, at a chosen instant.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// A tiny xorshift generator, so kill instants differ per trial and replay from a seed:
/// the delays need spread, not quality.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// A generator for one stream (a command's trials) of a run seeded `seed`.
    pub fn stream(seed: u64, name: &str) -> Self {
        // FNV-1a of the name, so each command draws its own instants from the one seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Self((seed ^ h) | 1)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Trial `trial` of `trials`: a delay in its own stratum of `[min, max)` ms, so both
    /// kills during the first writes and kills deep into a run are covered every time.
    pub fn delay(&mut self, trial: u64, trials: u64, min: u64, max: u64) -> Duration {
        let stratum = ((max - min) / trials.max(1)).max(1);
        Duration::from_millis(min + (trial * stratum) % (max - min) + self.next() % stratum)
    }
}

/// The `baton` under test, run in a project directory.
#[derive(Debug, Clone)]
pub struct Baton {
    pub exe: PathBuf,
}

impl Baton {
    /// `baton [--as who] args…` in `dir`, with nothing of the caller's Baton environment.
    pub fn cmd(&self, dir: &Path, who: Option<&str>, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.current_dir(dir)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .env_remove("BATON_URL")
            .env_remove("BATON_KEY")
            .env_remove("BATON_DB")
            .stdin(Stdio::null());
        if let Some(who) = who {
            cmd.args(["--as", who]);
        }
        cmd.args(args);
        cmd
    }

    pub fn output(&self, dir: &Path, who: Option<&str>, args: &[&str]) -> Result<Output, String> {
        self.cmd(dir, who, args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Runs and insists on success; stdout.
    pub fn ok(&self, dir: &Path, who: Option<&str>, args: &[&str]) -> Result<String, String> {
        let out = self.output(dir, who, args)?;
        if !out.status.success() {
            return Err(format!(
                "baton {args:?} as {who:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8(out.stdout).map_err(|_| format!("baton {args:?} printed non-UTF-8"))
    }

    /// As [`Baton::ok`] with `--json`, parsed.
    pub fn json(
        &self,
        dir: &Path,
        who: Option<&str>,
        args: &[&str],
    ) -> Result<serde_json::Value, String> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(dir, who, &all)?;
        serde_json::from_str(&out).map_err(|e| format!("baton {args:?}: not JSON ({e}): {out}"))
    }
}

/// What a killed loop left.
#[derive(Debug)]
pub struct Killed {
    /// Its complete stdout lines: what it acknowledged, in order. A line cut by the kill
    /// was never acknowledged.
    pub acknowledged: Vec<String>,
    /// False when the loop had finished before the kill.
    pub mid_run: bool,
}

/// Runs `script` (`sh -c`, `$1` the `baton` executable) in `dir`, in a process group of its
/// own, and SIGKILLs the group after `delay`. The loop prints one line per acknowledged
/// write, after the `baton` that made it exited 0; it stops with the status of a `baton`
/// that failed, which is a problem (nothing killed it).
pub fn kill_loop(
    baton: &Baton,
    dir: &Path,
    script: &str,
    env: &[(&str, &str)],
    delay: Duration,
) -> Result<Killed, String> {
    let mut child = Command::new("sh")
        .args(["-c", script, "crash-loop"])
        .arg(&baton.exe)
        .current_dir(dir)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .env_remove("BATON_URL")
        .env_remove("BATON_KEY")
        .env_remove("BATON_DB")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so one kill takes the shell and every process under it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let group = Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    // The delay is the experiment (when the kill lands); a loop that ends first is not
    // waited out.
    if rx.recv_timeout(delay).is_err() {
        // The group is gone (ESRCH) when the loop finished meanwhile: nothing to kill.
        let _ = killpg(group, Signal::SIGKILL);
    }
    let status = waiter
        .join()
        .map_err(|_| "the loop's waiter panicked".to_owned())?
        .map_err(|e| format!("cannot reap the loop: {e}"))?;
    // The shell is reaped, but a `baton` it ran may still be dying: SIGKILL lands once a
    // process leaves the kernel (an fsync in flight finishes first). The store is read only
    // once none of the group is left.
    until_gone(group.as_raw())?;
    // A grandchild that left the group could hold the pipes open; the group is dead,
    // so the readers end.
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let mid_run = match (status.signal(), status.code()) {
        (Some(9), _) => true,
        (_, Some(0)) => false,
        _ => {
            return Err(format!(
                "the loop failed on its own ({status}): {}",
                String::from_utf8_lossy(&err).trim()
            ));
        }
    };
    let out = String::from_utf8_lossy(&out);
    let acknowledged = match out.rfind('\n') {
        Some(end) => out[..end].lines().map(str::to_owned).collect(),
        None => Vec::new(),
    };
    Ok(Killed {
        acknowledged,
        mid_run,
    })
}

/// Waits until no process of group `group` is left but zombies (dead, not yet collected).
fn until_gone(group: i32) -> Result<(), String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let alive = std::fs::read_dir("/proc")
            .map_err(|e| format!("cannot read /proc: {e}"))?
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
            .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
            .any(|stat| {
                // After the command's name: state, ppid, process group, …
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
                fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
            });
        if !alive {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "a process of the killed group {group} is still alive after 30 s"
            ));
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Copies the directory `from` into `to` (which exists), modes and all.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .map_err(|e| format!("cannot run cp: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cp -a {} {} failed", from.display(), to.display()))
    }
}
