//! The one way the binary reads an input file, and the one way it writes a file.
//!
//! Reading takes at most a cap of bytes, whatever the file is: a regular file over the
//! cap, a pipe, a FIFO or a device such as `/dev/zero` is read up to one byte past the cap
//! and then refused, so no input can hold unbounded memory or time. `-` is standard input.
//!
//! Writing goes through a temporary file beside the target, fsync'd and renamed over it,
//! so a crash leaves the old file or the new one. A new file gets the user's umask (0644
//! under 022); a file that existed keeps its mode.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{CommandError, CommandResult, ErrorKind};

/// The cap on an input file that has no cap of its own (a `STATE.md`, a handover, a
/// settings file): far above any real one, far below the machine's memory.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

/// What a bounded read found.
pub struct Bounded {
    /// The bytes read: all of the file, or the first `cap + 1` when it is over.
    pub bytes: Vec<u8>,
    /// Whether the file holds more than the cap.
    pub over: bool,
}

/// Reads at most `cap + 1` bytes of `path` (`-`: standard input). A directory is refused
/// here rather than by the read. A FIFO is opened without waiting for a writer: one that
/// no process writes reads as empty at once, rather than holding the command forever.
pub fn read_bounded(path: &Path, cap: usize) -> std::io::Result<Bounded> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::os::unix::fs::OpenOptionsExt;
    let reader: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NONBLOCK.bits())
            .open(path)?;
        // Opened; reads block again (until data, or the end when no writer is left).
        let flags = OFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GETFL)?);
        fcntl(&file, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
        if file.metadata()?.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory, not a file",
            ));
        }
        Box::new(file)
    };
    let mut bytes = Vec::new();
    reader.take(cap as u64 + 1).read_to_end(&mut bytes)?;
    let over = bytes.len() > cap;
    Ok(Bounded { bytes, over })
}

/// The file's bytes, or an error that names the file (`what`, the flag that gave it) and,
/// when it is too large, the cap.
pub fn read(path: &Path, cap: usize, what: &str) -> CommandResult<Vec<u8>> {
    let shown = format!(
        "{what}{}{}",
        if what.is_empty() { "" } else { " " },
        path.display()
    );
    let read = read_bounded(path, cap).map_err(|e| {
        let kind = if e.kind() == std::io::ErrorKind::NotFound {
            ErrorKind::NotFound
        } else {
            ErrorKind::Refused
        };
        CommandError::new(kind, format!("{shown}: {e}"))
    })?;
    if read.over {
        return Err(CommandError::refused(format!(
            "{shown} is over the cap of {cap} bytes (or is not a regular file that ends); \
             nothing was read past the cap and nothing was stored"
        )));
    }
    Ok(read.bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_text(path: &Path, cap: usize, what: &str) -> CommandResult<String> {
    let bytes = read(path, cap, what)?;
    let shown = format!(
        "{what}{}{}",
        if what.is_empty() { "" } else { " " },
        path.display()
    );
    String::from_utf8(bytes).map_err(|_| CommandError::refused(format!("{shown}: not UTF-8 text")))
}

/// How old a temporary file left beside a target must be before a later write removes
/// it: far longer than any write takes, so another process's write in flight is never
/// touched.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the temporary files (`.NAME.*.tmp`) that writes of `name` killed before their
/// rename left in `dir`, once they are older than [`STALE_TMP`].
fn sweep(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if !(file.starts_with(&prefix) && file.ends_with(".tmp")) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > STALE_TMP);
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes `contents` to `path` so that a crash leaves the old file or the new one: a
/// temporary file beside it, fsync'd, renamed over it, and the directory fsync'd. The
/// mode is the old file's, or 0666 less the umask for a new one.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| ".baton".into(), |n| n.to_string_lossy());
    let existing = std::fs::metadata(path).ok().map(|m| m.permissions());
    sweep(&dir, &name);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        // Created with 0666: the kernel applies the umask, as for any new file.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(&dir)?;
    if let Some(mode) = existing {
        tmp.as_file().set_permissions(mode)?;
    }
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(&dir)?.sync_all()
}
