//! The one reader of a child process's output, for `baton run` (and the reviewers it
//! launches) and `baton evidence run`: each stream's bytes passed on unchanged as they
//! come, its lines read on the way with a bound on how long a line may grow, and what is
//! kept of it (a bounded capture of stdout, or the last lines); and the exit code a
//! status stands for.
//!
//! It never stops a child: a stream of ours that closed is no longer written to, and the
//! child's is still read to its end.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use baton_core::run::MAX_PARSED_LINE;

/// The most stdout a captured run keeps, in bytes.
pub const MAX_CAPTURED: usize = 1024 * 1024;

/// What the reader saw of a stream, in order.
pub enum Piece<'a> {
    /// Bytes arrived, and were passed on.
    Bytes,
    /// A line, without its newline (the last one may have none).
    Line(&'a [u8]),
    /// The first [`MAX_PARSED_LINE`] bytes of a longer line.
    Cut(&'a [u8]),
}

/// Copies `from` to `to` unchanged until `from` ends, telling `seen` of each piece: the
/// bytes as they arrive, then each line they complete. A line never holds more than about
/// [`MAX_PARSED_LINE`] bytes in memory, however long the child's line.
pub fn copy(mut from: impl Read, mut to: impl Write, mut seen: impl FnMut(Piece<'_>)) {
    let mut line: Vec<u8> = Vec::new();
    let mut too_long = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buf[..n];
        // A closed stream of ours must not stop the child: keep reading, stop writing.
        let _ = to.write_all(chunk).and_then(|()| to.flush());
        seen(Piece::Bytes);
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            if too_long {
                seen(Piece::Cut(&line));
            } else {
                line.extend_from_slice(&rest[..i]);
                seen(Piece::Line(&line));
            }
            line.clear();
            too_long = false;
            rest = &rest[i + 1..];
        }
        if !too_long {
            line.extend_from_slice(rest);
            if line.len() > MAX_PARSED_LINE {
                line.truncate(MAX_PARSED_LINE);
                too_long = true;
            }
        }
    }
    if too_long {
        seen(Piece::Cut(&line));
    } else if !line.is_empty() {
        seen(Piece::Line(&line));
    }
}

/// A writer into a shared buffer that keeps the first [`MAX_CAPTURED`] bytes written to
/// it and drops the rest: what a captured command printed.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// What was kept, leaving the buffer empty.
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_CAPTURED.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The last lines of a child's output (lossy UTF-8, line ends trimmed), and how many
/// lines it printed in all.
pub struct Tail {
    keep: usize,
    lines: VecDeque<String>,
    total: u64,
}

impl Tail {
    pub fn new(keep: usize) -> Self {
        Self {
            keep,
            lines: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line)
            .trim_end_matches(['\n', '\r'])
            .to_owned();
        self.lines.push_back(text);
        self.total += 1;
        if self.lines.len() > self.keep {
            self.lines.pop_front();
        }
    }

    /// The lines kept, oldest first, and the count of every line.
    pub fn lines(&self) -> (Vec<String>, u64) {
        (self.lines.iter().cloned().collect(), self.total)
    }
}

/// Copies `from` to `to` on a thread of its own, keeping each line in `tail`.
pub fn tail_into(
    from: impl Read + Send + 'static,
    to: impl Write + Send + 'static,
    tail: &Arc<Mutex<Tail>>,
) -> std::thread::JoinHandle<()> {
    let tail = Arc::clone(tail);
    std::thread::spawn(move || {
        copy(from, to, |piece| {
            if let Piece::Line(line) | Piece::Cut(line) = piece {
                tail.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
    })
}

/// The exit code a status stands for: the child's own, or 128+N when signal N stopped it.
pub fn exit_code(status: &ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(input: &[u8]) -> (Vec<u8>, Vec<(bool, usize)>) {
        let mut out = Vec::new();
        let mut lines = Vec::new();
        copy(input, &mut out, |piece| match piece {
            Piece::Bytes => {}
            Piece::Line(l) => lines.push((true, l.len())),
            Piece::Cut(l) => lines.push((false, l.len())),
        });
        (out, lines)
    }

    #[test]
    fn output_passes_through_unchanged_and_its_lines_are_read_on_the_way() {
        let (out, lines) = pieces(b"one\n\nthree\r\nlast");
        assert_eq!(out, b"one\n\nthree\r\nlast");
        assert_eq!(lines, [(true, 3), (true, 0), (true, 6), (true, 4)]);
    }

    #[test]
    fn a_line_past_the_bound_is_cut_and_the_next_one_read_whole() {
        let mut input = vec![b'x'; MAX_PARSED_LINE + 100_000];
        input.extend_from_slice(b"\nok\n");
        let (out, lines) = pieces(&input);
        assert_eq!(out.len(), input.len());
        assert_eq!(lines, [(false, MAX_PARSED_LINE), (true, 2)]);
    }

    #[test]
    fn a_tail_keeps_the_last_lines_and_counts_them_all() {
        let mut tail = Tail::new(2);
        for line in [&b"a"[..], b"b\r", b"c"] {
            tail.push(line);
        }
        assert_eq!(tail.lines(), (vec!["b".to_owned(), "c".to_owned()], 3));
    }

    #[test]
    fn a_capture_keeps_its_bound_and_swallows_the_rest() {
        let mut captured = Captured::default();
        captured.write_all(&vec![1; MAX_CAPTURED - 1]).unwrap();
        assert_eq!(captured.write(&[2, 3, 4]).unwrap(), 3);
        let kept = captured.take();
        assert_eq!(kept.len(), MAX_CAPTURED);
        assert_eq!(kept.last(), Some(&2));
        assert!(captured.take().is_empty());
    }
}
