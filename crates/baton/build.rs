//! How `baton` is linked on Linux.
//!
//! A command runs for a few milliseconds, and much of that is spent before and around the
//! work: loading the executable and faulting in the pages of code it runs.
//!
//! - Position-dependent (`-no-pie`): a position-independent executable of this size has
//!   the loader apply about 47,000 relocations, writing to some 200 pages of pointers.
//!   Linked without PIE those addresses are fixed at link time (about 230 relocations
//!   remain, for the shared libraries), which took `baton --version` from 549 page faults
//!   and 2.85 ms to 331 and 2.2 ms. The price is that the executable's own code is not
//!   placed at a random address (shared libraries, the stack and the heap still are).
//! - Code layout (x86-64, where the toolchain links with LLD): the functions the everyday
//!   commands run, listed in `layout.txt`, are placed side by side, so a command maps in a
//!   few pages of code instead of one here and one there across 24 MB. A name the linker
//!   does not find is skipped: an old list costs speed, never a build.
//! - The unwinder linked in (GNU, where GCC's static unwinder, `libgcc_eh.a`, is found):
//!   Rust's standard library otherwise loads `libgcc_s.so.1`, whose constructor asks the
//!   processor what it supports with a run of `cpuid` instructions, each a trap to the
//!   hypervisor on a virtual machine: 50–100 µs of every command's start here. Linked in
//!   whole, the static unwinder defines what `libgcc_s` would, and the shared library is
//!   no longer needed (`--as-needed`). Panics unwind and backtraces work as before. Not
//!   found, the executable links as before.
//!
//! See DECISIONS.md, "Process start" and "Code layout".

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Whether the PostgreSQL tests can run here (`baton-testdb`).
    baton_testdb::build_script();
    // `layout.txt` is committed: were it missing, naming it here would make cargo run
    // this script, and relink the executable, on every build.
    println!("cargo:rerun-if-changed=layout.txt");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-no-pie");
    if var("CARGO_CFG_TARGET_ENV") == "gnu"
        && let Some(dir) = static_unwinder_dir(&var("CC"))
    {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
    if var("CARGO_CFG_TARGET_ARCH") == "x86_64" && var("CARGO_CFG_TARGET_ENV") == "gnu" {
        let layout = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("layout.txt");
        if layout.exists() {
            println!(
                "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                layout.display()
            );
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// The directory holding the C compiler's `libgcc_eh.a`, if it has one.
fn static_unwinder_dir(cc: &str) -> Option<std::path::PathBuf> {
    let cc = if cc.is_empty() { "cc" } else { cc };
    let out = std::process::Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    // A compiler that does not have the file prints its bare name back.
    let path = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file())
        .then(|| path.parent().map(std::path::Path::to_path_buf))
        .flatten()
}
