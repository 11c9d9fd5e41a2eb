//! Links `baton` as a position-dependent executable on Linux.
//!
//! A command runs for a few milliseconds, and a position-independent executable of this
//! size spends a good part of them before `main`: the loader applies about 47,000
//! relocations, writing to some 200 pages of pointers. Linked without PIE those addresses
//! are fixed at link time (about 230 relocations remain, for the shared libraries), which
//! took `baton --version` from 549 page faults and 2.85 ms to 331 and 2.2 ms. The price is
//! that the executable's own code is not placed at a random address (shared libraries,
//! the stack and the heap still are); see DECISIONS.md, "Process start".

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
