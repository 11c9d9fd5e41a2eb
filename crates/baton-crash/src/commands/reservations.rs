//! The reservation writes under SIGKILL: reserving, renewing, releasing and an owner's
//! force-release in one loop; and the git guard's record of a commit that went past it.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{Findings, events, push, team};
use crate::Counter;
use crate::process::{Baton, Killed};

/// `impl-1` reserves `src/f-N.rs`; every second one it renews, then releases; every other
/// third one the owner force-releases (`impl-1` has no run: it is quiet).
pub(super) const RESERVE_LOOP: &str = r#"i=1
while :; do
  out=$("$1" --as impl-1 --json reserve "src/f-$i.rs" --ttl 1h) || exit $?
  id=$(printf '%s' "$out" | sed 's/.*"id":"\([^"]*\)".*/\1/')
  echo "reserve f-$i $id"
  if [ $((i % 2)) -eq 0 ]; then
    "$1" --as impl-1 reserve "src/f-$i.rs" --ttl 2h >/dev/null || exit $?
    echo "renew f-$i $id"
    "$1" --as impl-1 release "src/f-$i.rs" >/dev/null || exit $?
    echo "release f-$i"
  elif [ $((i % 3)) -eq 0 ]; then
    "$1" --as owner release --force "$id" --reason "crash $i" >/dev/null || exit $?
    echo "force f-$i $id"
  fi
  i=$((i + 1))
done"#;

/// The `data` of the log's reservation events, in order.
fn reservation_events(baton: &Baton, dir: &Path) -> Result<Vec<Value>, String> {
    Ok(events(baton, dir)?
        .into_iter()
        .filter(|e| e["kind"] == "reservation.changed")
        .map(|e| e["data"].clone())
        .collect())
}

pub(super) fn check_reserve(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let log = reservation_events(baton, dir)?;
    let count = |step: &str, key: &str, value: &str, forced: Option<bool>| {
        log.iter()
            .filter(|d| d["step"] == step && d[key] == value)
            .filter(|d| forced.is_none_or(|f| d.get("forced").is_some() == f))
            .count()
    };
    // Each path's reservation id, as its reserve acknowledged it.
    let mut ids: HashMap<String, String> = HashMap::new();
    for line in &killed.acknowledged {
        let words: Vec<&str> = line.split(' ').collect();
        let (what, file) = (words[0], format!("src/{}.rs", words[1]));
        let found = match what {
            "reserve" => {
                ids.insert(words[1].to_owned(), words[2].to_owned());
                count("reserved", "path", &file, None)
            }
            "renew" => count("renewed", "id", words[2], None),
            "release" => match ids.get(words[1]) {
                Some(id) => count("released", "id", id, Some(false)),
                None => continue,
            },
            "force" => count("released", "id", words[2], Some(true)),
            other => return Err(format!("the loop printed {other:?}")),
        };
        match found {
            1 => {}
            0 => push(
                findings,
                Counter::Lost,
                format!("acknowledged {line} is not stored"),
            ),
            n => push(
                findings,
                Counter::Duplicated,
                format!("{line} is stored {n} times"),
            ),
        }
    }
    let reserves = killed
        .acknowledged
        .iter()
        .filter(|l| l.starts_with("reserve "))
        .count();
    let stored = log.iter().filter(|d| d["step"] == "reserved").count();
    if stored > reserves + 1 {
        push(
            findings,
            Counter::Other,
            format!("{stored} reservations stored, {reserves} acknowledged"),
        );
    }
    super::duplicate_events(baton, dir, findings)?;
    Ok(format!("{stored} reservations, {} events", log.len()))
}

/// A project in a git repository whose `held/**` `impl-1` holds for a day.
pub(super) fn guarded(baton: &Baton, dir: &Path) -> Result<(), String> {
    team(baton, dir)?;
    git(dir, &["init", "-q"])?;
    git(dir, &["commit", "-q", "--allow-empty", "-m", "start"])?;
    baton.ok(
        dir,
        Some("impl-1"),
        &["reserve", "held/**", "--ttl", "24h", "--reason", "crash"],
    )?;
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.email=crash@example.org",
            "-c",
            "user.name=crash",
        ])
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The planner commits into `held/` past the guard (`--no-verify`), then what the
/// post-commit hook runs records it; a line once recorded.
pub(super) const BYPASS_LOOP: &str = r#"i=1
while :; do
  mkdir -p held
  echo "$i" > "held/b-$i.txt"
  git add held || exit 1
  git -c user.email=crash@example.org -c user.name=crash commit -q --no-verify -m "b-$i" || exit 1
  out=$("$1" --as planner --json guard post-commit 2>/dev/null) || exit $?
  case "$out" in
    *'"generation":'[0-9]*) echo "bypass $(git rev-parse HEAD)" ;;
    *) exit 3 ;;
  esac
  i=$((i + 1))
done"#;

pub(super) fn check_bypass(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let log = reservation_events(baton, dir)?;
    let recorded: Vec<&Value> = log.iter().filter(|d| d["step"] == "bypassed").collect();
    for line in &killed.acknowledged {
        let commit = line.trim_start_matches("bypass ");
        match recorded.iter().filter(|d| d["commit"] == commit).count() {
            1 => {}
            0 => push(
                findings,
                Counter::Lost,
                format!("acknowledged {line} is not stored"),
            ),
            n => push(
                findings,
                Counter::Duplicated,
                format!("{line} is stored {n} times"),
            ),
        }
    }
    if recorded.len() > killed.acknowledged.len() + 1 {
        push(
            findings,
            Counter::Other,
            format!(
                "{} bypasses stored, {} acknowledged",
                recorded.len(),
                killed.acknowledged.len()
            ),
        );
    }
    super::duplicate_events(baton, dir, findings)?;
    Ok(format!("{} bypasses", recorded.len()))
}
