//! The map stays a map of what is here: every folder of the repository that holds source
//! (code, scripts, SQL, the page, recorded agent output) is named in docs/ARCHITECTURE.md,
//! by its path below its crate's `src/` (`negotiation/`), below its crate (`tests/cli/`),
//! or from the root outside `crates/` (`fuzz/fuzz_targets/`). A folder added without a
//! line on the map fails here.

use std::path::{Path, PathBuf};

/// Files that are data or documentation rather than source, and folders that are not the
/// project's own (dependencies, build output, fuzz corpora, snapshots).
const NOT_SOURCE: &[&str] = &["md", "json", "lock", "toml", "txt", "snap", "yaml", "yml"];
const SKIP_DIRS: &[&str] = &[
    "target",
    "node_modules",
    "corpus",
    "snapshots",
    "proptest-regressions",
    "__pycache__",
];

fn source_folders(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut holds_source = false;
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let entry = entry.expect("a folder entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            if !SKIP_DIRS.contains(&name.as_str()) && !name.starts_with(".venv") {
                source_folders(&path, out);
            }
        } else if kind.is_file() {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            holds_source |= !NOT_SOURCE.contains(&ext);
        }
    }
    if holds_source {
        out.push(dir.to_path_buf());
    }
}

/// How the map names a folder: below `crates/NAME/src/`, below `crates/NAME/`, or from
/// the root; `None` for a crate's root and its `src/` (each crate has a heading).
fn map_name(relative: &Path) -> Option<String> {
    let parts: Vec<&str> = relative
        .iter()
        .map(|p| p.to_str().expect("UTF-8"))
        .collect();
    let rest: &[&str] = match parts.as_slice() {
        ["crates", _, "src", rest @ ..] => rest,
        ["crates", _, rest @ ..] => rest,
        all => all,
    };
    (!rest.is_empty()).then(|| format!("{}/", rest.join("/")))
}

#[test]
fn architecture_names_every_folder_that_holds_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("the map");
    let mut folders = Vec::new();
    for top in ["crates", "fuzz", "web"] {
        source_folders(&root.join(top), &mut folders);
    }
    assert!(
        folders.len() > 30,
        "the walk found the repository's folders: {folders:?}"
    );
    let missing: Vec<String> = folders
        .iter()
        .filter_map(|dir| map_name(dir.strip_prefix(&root).expect("below the root")))
        .filter(|name| !map.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md does not name these folders (add a line to the code map): {missing:?}"
    );
}
