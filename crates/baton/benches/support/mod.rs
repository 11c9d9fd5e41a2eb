//! What every benchmark shares: running the binary under test in a project.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `baton ARGS…` in `project` (no inherited `BATON_*` identity or project), insisting
/// on success; returns what it printed.
pub fn baton(exe: &Path, project: &Path, args: &[&str]) -> Output {
    let out = Command::new(exe)
        .args(args)
        .current_dir(project)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .output()
        .expect("run baton");
    assert!(
        out.status.success(),
        "baton {args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
