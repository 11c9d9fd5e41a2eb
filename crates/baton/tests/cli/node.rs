//! The other side's JavaScript, pinned in `tests/node/package.json` and installed from
//! npm: Node 22 (npm's `node` package, so no runtime is downloaded from elsewhere), the
//! official MCP TypeScript SDK and conformance suite, the A2A JavaScript SDK, and the real
//! Claude Code and Codex binaries. The packages are installed once per checkout by
//! `npm ci` from the committed lock file (`.ci/run` does it first; a test does it when
//! they are missing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `tests/node/`, with its `node_modules` installed.
pub fn dir() -> PathBuf {
    installed("tests/node", "node_modules/.bin/node")
}

/// The folder `folder` (relative to this crate) with its `node_modules` installed: `npm
/// ci` from its committed lock file when `marker` is missing, one folder at a time.
pub fn installed(folder: &str, marker: &str) -> PathBuf {
    static INSTALLED: Mutex<()> = Mutex::new(());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let _one_at_a_time = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if !dir.join(marker).exists() {
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .output()
            .expect("run npm ci (apt-get install npm)");
        assert!(
            out.status.success(),
            "npm ci in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

/// A program `tests/node/` installs (`node`, `claude`, `codex`, `conformance`).
pub fn bin(name: &str) -> PathBuf {
    let path = dir().join("node_modules/.bin").join(name);
    assert!(path.exists(), "{} is missing after npm ci", path.display());
    path
}

/// Node 22, from npm's `node` package.
pub fn node() -> PathBuf {
    bin("node")
}

/// A command running `script` (a path relative to `tests/node/`) under Node 22, in
/// `tests/node/` so its imports resolve.
pub fn script(script: &str) -> Command {
    let dir = dir();
    let mut command = Command::new(node());
    command.arg(dir.join(script)).current_dir(&dir);
    command
}
