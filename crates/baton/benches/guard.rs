//! `cargo bench -p baton --bench guard`: the git guard's pre-commit hook (the script
//! `baton init --git-guard` installs, which runs `baton guard pre-commit`) as a whole
//! process, on a store of 10,000 live reservations held by 20 participants, beside its
//! floor — a bare `git diff --cached --name-only` process, the one read of the commit the
//! guard cannot do without — timed alternately (A B A B …) after a warm-up of each. Two
//! commits are timed: 20 staged files no one else holds (the hook lets it in), and the
//! same with one file another participant holds (the hook refuses it, naming the holder).
//! The goal is 50 ms. Prints a table and asserts nothing about time; run without `--bench`
//! (as `cargo test --benches` does) it only checks that it works, on 500 reservations.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod support;
use support::baton;

use baton_core::reservation::{Ask, PathGlob};
use baton_core::{Passname, Policy};
use baton_store::{SqliteStore, Store};

const HOLDERS: usize = 20;

fn git(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.email=bench@example.org",
            "-c",
            "user.name=bench",
        ])
        .args(args)
        .env_remove("BATON_AS")
        .env_remove("BATON_PROJECT")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `reservations` globs `pkg-A/mod-B/**`, each held exclusively by one of the holders, one
/// of them a glob that begins with a wildcard (`*.lock`: what every lookup must read).
async fn seed(db: &Path, reservations: usize) {
    let store = Store::new(
        SqliteStore::open(db, Duration::from_secs(30))
            .await
            .expect("open the store"),
    );
    let holders: Vec<Passname> = (0..HOLDERS)
        .map(|n| Passname::new(&format!("w-{n}")).unwrap())
        .collect();
    for who in &holders {
        store
            .add_participant("@bench", who, "executor", None::<Policy>)
            .await
            .expect("a participant");
    }
    let per_holder = reservations / HOLDERS;
    for (h, who) in holders.iter().enumerate() {
        let mut paths: Vec<PathGlob> = (0..per_holder)
            .map(|i| {
                let n = h * per_holder + i;
                PathGlob::new(&format!("pkg-{}/mod-{}/**", n / 100, n % 100)).unwrap()
            })
            .collect();
        if h == 0 {
            paths.pop();
            paths.push(PathGlob::new("*.lock").unwrap());
        }
        for chunk in paths.chunks(500) {
            let ask = Ask {
                paths: chunk.to_vec(),
                exclusive: true,
                reason: "bench".into(),
                ttl_ms: 86_400_000,
            };
            store.reserve(who, &ask).await.expect("seed reservations");
        }
    }
}

/// The hook as git runs it, in `dir`, as `who`: how long, and whether it let the commit in.
fn hook(dir: &Path, who: &str) -> (Duration, bool) {
    let started = Instant::now();
    let out = Command::new(dir.join(".git/hooks/pre-commit"))
        .current_dir(dir)
        .env("BATON_AS", who)
        .env_remove("BATON_PROJECT")
        .output()
        .expect("the hook runs");
    (started.elapsed(), out.status.success())
}

fn floor(dir: &Path) -> Duration {
    let started = Instant::now();
    git(
        dir,
        &["diff", "--cached", "--name-only", "-z", "--no-renames"],
    );
    started.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (reservations, runs) = if full { (10_000, 30) } else { (500, 2) };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    git(project, &["init", "-q"]);
    baton(&exe, project, &["init", "--git-guard"]);
    git(project, &["add", ".gitignore"]);
    git(project, &["commit", "-q", "-m", "start"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let seeding = Instant::now();
    runtime.block_on(seed(&project.join(".baton/baton.db"), reservations));
    let seeded_in = seeding.elapsed();

    // Twenty files w-0 may commit: its own reservations' and paths no one holds.
    for i in 0..20 {
        let file = if i < 10 {
            format!("pkg-0/mod-{i}/f{i}.rs")
        } else {
            format!("docs/notes-{i}.md")
        };
        let path = project.join(&file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{i}\n")).unwrap();
        git(project, &["add", &file]);
    }
    let mut table = Vec::new();
    for (case, held_by_another) in [
        ("20 files, none another's", false),
        ("20 files, one another's", true),
    ] {
        if held_by_another {
            let n = reservations / 2 + 7;
            let file = format!("pkg-{}/mod-{}/x.rs", n / 100, n % 100);
            let file = file.as_str();
            let path = project.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x\n").unwrap();
            git(project, &["add", file]);
        }
        let (_, admitted) = hook(project, "w-0");
        assert_eq!(admitted, !held_by_another, "{case}: the hook's verdict");
        floor(project);
        let (mut hooked, mut floors) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            hooked.push(hook(project, "w-0").0);
            floors.push(floor(project));
        }
        table.push((case, median(hooked.clone()), p90(hooked), median(floors)));
    }
    println!(
        "store: {reservations} live reservations held by {HOLDERS} participants, seeded in {:.1} s; goal 50 ms",
        seeded_in.as_secs_f64()
    );
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>8}",
        "pre-commit hook", "median ms", "p90 ms", "floor ms", "ratio"
    );
    for (case, median, p90, floor) in table {
        println!(
            "{case:<28} {:>10} {:>10} {:>10} {:>8.1}",
            ms(median),
            ms(p90),
            ms(floor),
            median.as_secs_f64() / floor.as_secs_f64()
        );
    }
}
