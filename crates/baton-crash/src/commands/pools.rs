//! The pool writes under SIGKILL: a request sent to the executors' pool, then claimed by
//! `impl-1`, by id (`claim`) or as the most urgent ready item (`next`), in one loop.

use std::collections::HashMap;
use std::path::Path;

use super::{Findings, events, push};
use crate::Counter;
use crate::process::{Baton, Killed};

/// The planner sends `p-N` to `role:executor`; `impl-1` claims it, by id every second
/// time and by `next` otherwise (every earlier one is claimed, so `next` takes it).
pub(super) const CLAIM_LOOP: &str = r#"i=1
while :; do
  id=$("$1" --as planner send --to role:executor --type request --topic pool --body "p-$i") || exit $?
  echo "send $id"
  if [ $((i % 2)) -eq 0 ]; then
    "$1" --as impl-1 claim "$id" >/dev/null || exit $?
  else
    "$1" --as impl-1 next >/dev/null || exit $?
  fi
  echo "claim $id"
  i=$((i + 1))
done"#;

pub(super) fn check_claims(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let log = events(baton, dir)?;
    let mut sent: HashMap<String, usize> = HashMap::new();
    let mut claimed: HashMap<String, usize> = HashMap::new();
    for e in &log {
        match e["kind"].as_str() {
            Some("message.sent") if e["data"]["pool"] == "role:executor" => {
                *sent
                    .entry(e["data"]["id"].as_str().unwrap_or_default().to_owned())
                    .or_default() += 1;
            }
            Some("pool.claimed") => {
                *claimed
                    .entry(e["data"]["message"].as_str().unwrap_or_default().to_owned())
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    for line in &killed.acknowledged {
        let Some((what, id)) = line.split_once(' ') else {
            return Err(format!("the loop printed {line:?}"));
        };
        let found = match what {
            "send" => sent.get(id).copied().unwrap_or(0),
            "claim" => claimed.get(id).copied().unwrap_or(0),
            other => return Err(format!("the loop printed {other:?}")),
        };
        if found == 0 {
            push(
                findings,
                Counter::Lost,
                format!("acknowledged {line} is not stored"),
            );
        }
    }
    for (id, n) in claimed.iter().filter(|(_, n)| **n > 1) {
        push(
            findings,
            Counter::Duplicated,
            format!("{id} is claimed {n} times"),
        );
    }
    if let Some(id) = claimed.keys().find(|id| !sent.contains_key(*id)) {
        push(
            findings,
            Counter::Other,
            format!("{id} is claimed but was never sent to the pool"),
        );
    }
    super::duplicate_events(baton, dir, findings)?;
    Ok(format!(
        "{} sent to the pool, {} claimed",
        sent.len(),
        claimed.len()
    ))
}
