//! Sets `cfg(baton_test_postgres)` where the PostgreSQL tests can run (`baton-testdb`), and
//! embeds each backend's migrations from its `migrations/` directory, so a migration is
//! added by adding its file.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    baton_testdb::build_script();
    for backend in ["sqlite", "postgres"] {
        migrations(backend);
    }
}

/// Writes `$OUT_DIR/BACKEND_migrations.rs`: the scripts of `src/BACKEND/migrations/`, each
/// by `include_str!`, in the order of their numbers. A store records how many ran, so the
/// files must be numbered from `001` with no gap and no number twice: anything else fails
/// the build.
fn migrations(backend: &str) {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest)
        .join("src")
        .join(backend)
        .join("migrations");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").file_name())
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    let mut list = String::from("&[\n");
    for (number, file) in (1..).zip(&files) {
        assert!(
            file.starts_with(&format!("{number:03}_")),
            "{}: migration {number} should be named {number:03}_….sql, found {file}",
            dir.display()
        );
        let path = dir.join(file);
        let path = path.to_str().expect("a migration's path is UTF-8");
        writeln!(list, "    include_str!({path:?}),").expect("a string takes writes");
    }
    list.push(']');
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let file = Path::new(&out).join(format!("{backend}_migrations.rs"));
    std::fs::write(&file, list).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}
