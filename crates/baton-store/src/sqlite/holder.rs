//! Who holds a store's write lock, for the message of a writer that waited in vain.
//!
//! In WAL mode a SQLite writer holds an exclusive POSIX lock on byte 120 of the `-shm`
//! file (the first of the shared-memory locks, `WAL_WRITE_LOCK`) for as long as its
//! transaction is open. Linux lists every such lock in `/proc/locks` with the process that
//! holds it, so the holder is found without any bookkeeping on the way to the lock: the
//! happy path pays nothing. Elsewhere, or when the holder is in another PID namespace, it
//! stays unknown and the message says "another writer".

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::Holder;

/// The byte of the `-shm` file a writer locks (SQLite's `UNIX_SHM_BASE`, 120, plus
/// `WAL_WRITE_LOCK`, 0).
const WRITE_LOCK_BYTE: u64 = 120;

/// The longest command line a message quotes.
const MAX_COMMAND: usize = 120;

/// The process holding the write lock of the store at `db`, if one other than this one
/// does and it can be seen.
pub(super) fn holder(db: &Path) -> Option<Holder> {
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    let inode = std::fs::metadata(shm).ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = writer(&locks, inode)?;
    if pid == std::process::id() {
        return None;
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut command: String = String::from_utf8_lossy(&command)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if command.chars().count() > MAX_COMMAND {
        command = command.chars().take(MAX_COMMAND).collect::<String>() + "…";
    }
    Some(Holder { pid, command })
}

/// The process holding an exclusive lock over the write byte of the file `inode`, in the
/// text of `/proc/locks`: lines such as
/// `3: POSIX  ADVISORY  WRITE 4711 fd:01:1234567 120 120` (the device, then the inode;
/// the range's end may be `EOF`).
fn writer(locks: &str, inode: u64) -> Option<u32> {
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // A blocked request is listed too, as "-> POSIX …": it holds nothing.
        let fields = match fields.as_slice() {
            [_, "->", ..] => return None,
            [_, rest @ ..] => rest,
            [] => return None,
        };
        let [kind, _, mode, pid, file, start, end, ..] = fields else {
            return None;
        };
        let held_inode: u64 = file.rsplit(':').next()?.parse().ok()?;
        let start: u64 = start.parse().ok()?;
        let covers = match *end {
            "EOF" => start <= WRITE_LOCK_BYTE,
            end => start <= WRITE_LOCK_BYTE && WRITE_LOCK_BYTE <= end.parse().ok()?,
        };
        (matches!(*kind, "POSIX" | "OFDLCK") && *mode == "WRITE" && held_inode == inode && covers)
            .then(|| pid.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_is_the_exclusive_lock_over_byte_120_of_the_file() {
        let locks = "\
1: POSIX  ADVISORY  READ 77 fd:01:555 128 128
2: POSIX  ADVISORY  WRITE 88 fd:01:999 120 120
3: POSIX  ADVISORY  WRITE 4711 fd:01:555 120 120
3: -> POSIX  ADVISORY  WRITE 4712 fd:01:555 120 120
4: FLOCK  ADVISORY  WRITE 99 fd:01:555 0 EOF
";
        assert_eq!(writer(locks, 555), Some(4711));
        assert_eq!(writer(locks, 999), Some(88));
        assert_eq!(writer(locks, 1), None, "no lock on that file");
        let readers_only = "1: POSIX  ADVISORY  READ 77 fd:01:555 120 128\n";
        assert_eq!(
            writer(readers_only, 555),
            None,
            "a read lock is not the writer's"
        );
        let other_byte = "1: POSIX  ADVISORY  WRITE 77 fd:01:555 121 121\n";
        assert_eq!(writer(other_byte, 555), None, "a checkpoint is not a write");
    }
}
