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
//!
//! See DECISIONS.md, "Process start" and "Code layout".

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // `layout.txt` is committed: were it missing, naming it here would make cargo run
    // this script, and relink the executable, on every build.
    println!("cargo:rerun-if-changed=layout.txt");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-no-pie");
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
