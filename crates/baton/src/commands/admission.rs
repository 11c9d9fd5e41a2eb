//! Admission control for `baton run`: kernel advisory locks (`flock` through std's
//! `File::lock`/`try_lock`) in a directory derived from a hash of the checkout path.
//!
//! A writer first takes `writer.lock` exclusively; then every run takes one of the N
//! `slot-K.lock` files. The files' existence means nothing (they are never removed and
//! never read): only the kernel's locks count, and the kernel drops them when their
//! holder dies, however it dies. Nothing here sleeps or polls: without `--wait` a busy
//! lock is an immediate refusal; with it, the kernel wakes the waiter.

use crate::project::say_waiting;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::error::{CommandError, CommandResult, ErrorKind};

/// Held for as long as the run lives; dropping it releases the locks.
#[derive(Debug)]
pub struct Admission {
    _writer: Option<File>,
    _slot: File,
    pub slot: u32,
}

/// Where this checkout's locks live: `$XDG_RUNTIME_DIR/baton/locks/HASH`, or
/// `$TMPDIR/baton-UID/locks/HASH`, where HASH is the blake3 of the canonical checkout path.
pub fn lock_dir(checkout: &Path) -> std::io::Result<PathBuf> {
    let canonical = checkout.canonicalize()?;
    let hash = blake3::hash(canonical.as_os_str().as_encoded_bytes()).to_hex();
    let base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("baton"),
        None => std::env::temp_dir().join(format!("baton-{}", nix::unistd::getuid())),
    };
    let dir = base.join("locks").join(&hash[..16]);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    Ok(dir)
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

fn not_admitted(message: String) -> CommandError {
    let mut e = CommandError::new(ErrorKind::NotAdmitted, message);
    e.retryable = true;
    e
}

/// Takes the writer lock (when `writer`) and then a slot, or refuses at once (or waits,
/// with `wait`).
pub fn admit(checkout: &Path, writer: bool, slots: u32, wait: bool) -> CommandResult<Admission> {
    let dir = lock_dir(checkout)
        .map_err(|e| CommandError::failed(format!("the lock directory for admission: {e}")))?;
    let writer = if writer {
        let file = open(&dir.join("writer.lock"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) if wait => {
                say_waiting(&format!("the writer lock of {}", checkout.display()));
                file.lock()?;
            }
            Err(TryLockError::WouldBlock) => {
                return Err(not_admitted(format!(
                    "another writer run holds {}: only one `baton run --writer` at a time \
                         per checkout; retry when it ends, or pass --wait to queue",
                    checkout.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
        Some(file)
    } else {
        None
    };
    for slot in 0..slots {
        let file = open(&dir.join(format!("slot-{slot}.lock")))?;
        match file.try_lock() {
            Ok(()) => {
                return Ok(Admission {
                    _writer: writer,
                    _slot: file,
                    slot,
                });
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
    }
    if !wait {
        return Err(not_admitted(format!(
            "all {slots} run slot(s) of {} are taken: retry when a run ends, pass --wait to \
             queue, or raise --slots (see `baton runs`)",
            checkout.display()
        )));
    }
    say_waiting(&format!("a run slot of {}", checkout.display()));
    let (slot, file) = wait_for_any_slot(&dir, slots)?;
    Ok(Admission {
        _writer: writer,
        _slot: file,
        slot,
    })
}

/// Blocks until one of the slots is free. One thread waits on each slot in the kernel;
/// the first to get its lock wins, and a later one releases its lock the moment it gets
/// it (its thread then ends).
fn wait_for_any_slot(dir: &Path, slots: u32) -> CommandResult<(u32, File)> {
    let (tx, rx) = mpsc::channel::<std::io::Result<(u32, File)>>();
    let won = Arc::new(AtomicBool::new(false));
    for slot in 0..slots {
        let (tx, won) = (tx.clone(), Arc::clone(&won));
        let path = dir.join(format!("slot-{slot}.lock"));
        std::thread::spawn(move || {
            let got = open(&path).and_then(|f| f.lock().map(|()| f));
            match got {
                Ok(file) if !won.swap(true, Ordering::SeqCst) => {
                    let _ = tx.send(Ok((slot, file)));
                }
                Ok(_lost_the_race) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    }
    drop(tx);
    let mut last_error = None;
    for got in rx {
        match got {
            Ok(won) => return Ok(won),
            Err(e) => last_error = Some(e),
        }
    }
    Err(CommandError::failed(format!(
        "waiting for a run slot failed: {}",
        last_error.map_or_else(|| "no slot could be locked".to_owned(), |e| e.to_string())
    )))
}
