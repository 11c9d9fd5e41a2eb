//! Orders that wait on orders under SIGKILL: offering an order that waits (its edge), the
//! release an approval takes in its transaction, the hold a decline takes and its notice,
//! and the sender's proceed.

use std::collections::HashMap;
use std::path::Path;

use super::{Findings, order_doc, push, report_doc, team, write_json};
use crate::Counter;
use crate::process::{Baton, Killed};

/// How many pairs the starting point has documents for.
const PAIRS: usize = 60;

/// The documents: `a-N.json` (from the planner to impl-1) and `b-N.json`, which waits on
/// `wo_aN`; impl-1's report on each `wo_aN`.
pub(super) fn pairs(baton: &Baton, dir: &Path) -> Result<(), String> {
    team(baton, dir)?;
    for n in 1..=PAIRS {
        let a = format!("wo_a{n}");
        write_json(dir, &format!("a-{n}.json"), &order_doc(&a))?;
        let mut b = order_doc(&format!("wo_b{n}"));
        b["x-baton"]["after"] = serde_json::json!([a]);
        write_json(dir, &format!("b-{n}.json"), &b)?;
        write_json(dir, &format!("done-{n}.json"), &report_doc(&a, "done"))?;
    }
    Ok(())
}

/// For each pair: offer `wo_aN`, then `wo_bN` waiting on it; an odd N's `wo_aN` is
/// approved (releasing `wo_bN`), an even N's declined (holding it) and the planner
/// proceeds without it (offering it). Prints each step once it exited 0.
pub(super) const AFTER_LOOP: &str = r#"i=1
while [ "$i" -le 60 ]; do
  "$1" --as planner order create "a-$i.json" >/dev/null || exit $?
  "$1" --as planner order create "b-$i.json" >/dev/null || exit $?
  echo "waiting $i"
  if [ $((i % 2)) -eq 1 ]; then
    "$1" --as impl-1 order accept "wo_a$i" >/dev/null || exit $?
    "$1" --as impl-1 order report "wo_a$i" "done-$i.json" >/dev/null || exit $?
    "$1" --as planner order approve "wo_a$i" >/dev/null || exit $?
    echo "released $i"
  else
    "$1" --as impl-1 order decline "wo_a$i" >/dev/null || exit $?
    echo "held $i"
    "$1" --as planner order proceed "wo_b$i" >/dev/null || exit $?
    echo "offered $i"
  fi
  i=$((i + 1))
done"#;

/// Whatever the kill left, each `wo_bN` stands where its `wo_aN` puts it (open: waiting;
/// approved: offered; declined: held, or offered once the planner proceeded), and every
/// acknowledged step is there.
pub(super) fn check_after(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let listed = baton.json(dir, Some("planner"), &["order", "list", "--all"])?;
    let status: HashMap<String, String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                o["id"].as_str().unwrap_or_default().to_owned(),
                o["recorded_status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let of = |id: String| status.get(&id).map(String::as_str);
    let mut pairs = 0;
    for n in 1..=PAIRS {
        let (a, b) = (of(format!("wo_a{n}")), of(format!("wo_b{n}")));
        let Some(b) = b else { continue };
        pairs += 1;
        let fits = match a {
            Some("approved") => b == "offered",
            Some("declined") => b == "held" || b == "offered",
            Some(_) => b == "waiting",
            None => false,
        };
        if !fits {
            push(
                findings,
                Counter::Other,
                format!("wo_b{n} is {b} while wo_a{n} is {a:?}"),
            );
        }
    }
    for line in &killed.acknowledged {
        let (what, n) = line.split_once(' ').unwrap_or((line, ""));
        let b = of(format!("wo_b{n}"));
        let stored = match what {
            "waiting" => b.is_some(),
            "released" => b == Some("offered"),
            "held" => matches!(b, Some("held" | "offered")),
            "offered" => b == Some("offered"),
            other => return Err(format!("the loop printed {other:?}")),
        };
        if !stored {
            push(
                findings,
                Counter::Lost,
                format!("acknowledged {line}, but wo_b{n} is {b:?}"),
            );
        }
    }
    let notices = super::events(baton, dir)?
        .iter()
        .filter(|e| {
            e["kind"] == "message.sent"
                && e["data"]["payload"]["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("is held"))
        })
        .count();
    let holds = super::events(baton, dir)?
        .iter()
        .filter(|e| e["kind"] == "order.changed" && e["data"]["action"] == "hold")
        .count();
    if notices != holds {
        push(
            findings,
            Counter::Other,
            format!("{holds} holds, {notices} notices: a hold and its notice are one write"),
        );
    }
    super::duplicate_events(baton, dir, findings)?;
    Ok(format!("{pairs} pairs, {holds} held"))
}
