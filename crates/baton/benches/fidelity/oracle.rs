//! The oracle: from the generator's record alone, what the participant that resumes must
//! know, and what must never be shown to it as current. It reads no Baton projection and
//! no packet code; its rules are the issue's, with the choices it left open written in
//! docs/DECISIONS.md ("Handoff fidelity").
//!
//! 1. What it owes: open requests to it, orders it works on (offered, accepted, working),
//!    orders it must conclude (its own, submitted or blocked on a question), needs raised
//!    on its orders and not acknowledged, the alerts its lost runs raised and it has not
//!    acknowledged.
//! 2. What it waits on: its open requests (its own end open) and its orders at their
//!    workers (offered, accepted, working).
//! 3. The decisions in force, and the constraints on its topics (those of its open
//!    requests and orders) and paths (those it noted).
//! 4. Its stale notes (its newest note on each path, the path changed since), and its runs
//!    lost holding work whose alerts it has not acknowledged.
//! 5. The first action its last hand-over left (`resume_at`).
//!
//! A list of more than [`SHARE`] is known by its [`SHARE`] most urgent — by deadline, then
//! the oldest (decisions, constraints, notes: the newest) — and its exact count.

use std::collections::HashSet;

use super::generate::{Inbound, ME, OrderState, Outbound, Record};

/// How many of a list must be known item by item.
pub const SHARE: usize = 20;

/// Something to know, by its id or its exact text.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub text: Option<String>,
}

/// A count to know, named the way the score looks for it, with every item it counts.
#[derive(Debug, Clone)]
pub struct Count {
    pub one: &'static str,
    pub many: &'static str,
    pub items: Vec<Item>,
}

#[derive(Debug, Clone)]
pub struct Category {
    pub name: &'static str,
    pub must: Vec<Item>,
    pub counts: Vec<Count>,
}

/// Why an item must not be shown as current.
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    Superseded,
    Stale,
    Ended,
    /// Someone else's, open: fine only beside a name of one of its parties.
    Theirs(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct Bad {
    pub item: Item,
    pub why: Why,
}

pub struct Oracle {
    pub categories: Vec<Category>,
    pub bad: Vec<Bad>,
}

/// An entry of a list to rank: its deadline (if any), when it began, the item.
struct Entry {
    due: Option<i64>,
    step: u64,
    item: Item,
}

/// The most urgent [`SHARE`]: by deadline first, then the oldest.
fn urgent(mut list: Vec<Entry>) -> Vec<Item> {
    list.sort_by_key(|e| (e.due.is_none(), e.due, e.step));
    list.into_iter().take(SHARE).map(|e| e.item).collect()
}

/// The newest [`SHARE`].
fn newest(mut list: Vec<Entry>) -> Vec<Item> {
    list.sort_by_key(|e| std::cmp::Reverse(e.step));
    list.into_iter().take(SHARE).map(|e| e.item).collect()
}

fn item(id: &str, text: &str) -> Item {
    Item {
        id: id.to_owned(),
        text: Some(text.to_owned()),
    }
}

pub fn oracle(r: &Record) -> Oracle {
    // 1. What it owes.
    let requests_to_me: Vec<Entry> = r
        .requests
        .iter()
        .filter(|q| q.to == ME && q.inbound.open())
        .map(|q| Entry {
            due: None,
            step: q.step,
            item: item(&q.id, &q.text),
        })
        .collect();
    let order = |states: &[OrderState], mine: &dyn Fn(&str, &str) -> bool| -> Vec<Entry> {
        r.orders
            .iter()
            .filter(|o| states.contains(&o.state) && mine(&o.from, &o.to))
            .map(|o| Entry {
                due: Some(o.deadline),
                step: o.step,
                item: item(&o.id, &o.goal),
            })
            .collect()
    };
    use OrderState::*;
    let to_work = order(&[Offered, Accepted, Working], &|_, to| to == ME);
    let to_conclude = order(&[Submitted, Blocked], &|from, _| from == ME);
    let given = order(&[Offered, Accepted, Working], &|from, _| from == ME);
    let my_orders: HashSet<&str> = r
        .orders
        .iter()
        .filter(|o| o.from == ME)
        .map(|o| o.id.as_str())
        .collect();
    let needs: Vec<Entry> = r
        .needs
        .iter()
        .filter(|n| !n.acked && my_orders.contains(n.order.as_str()))
        .map(|n| Entry {
            due: None,
            step: n.step,
            item: item(&n.id, &n.text),
        })
        .collect();
    let alerts: Vec<Entry> = r
        .runs
        .iter()
        .filter(|run| run.who == ME && run.lost && !run.alerts_acked)
        .flat_map(|run| {
            run.alerts.iter().map(|a| Entry {
                due: None,
                step: run.step,
                item: Item {
                    id: a.clone(),
                    text: None,
                },
            })
        })
        .collect();
    let items = |l: &[Entry]| l.iter().map(|e| e.item.clone()).collect::<Vec<_>>();
    let owes_counts = vec![
        count(
            "open request to me",
            "open requests to me",
            items(&requests_to_me),
        ),
        count("order to work on", "orders to work on", items(&to_work)),
        count(
            "order to conclude",
            "orders to conclude",
            items(&to_conclude),
        ),
        count("need on my orders", "needs on my orders", items(&needs)),
        count(
            "alert about my runs",
            "alerts about my runs",
            items(&alerts),
        ),
    ];
    let owes = urgent(
        requests_to_me
            .into_iter()
            .chain(to_work)
            .chain(to_conclude)
            .chain(needs)
            .chain(alerts)
            .collect(),
    );

    // 2. What it waits on.
    let requests_from_me: Vec<Entry> = r
        .requests
        .iter()
        .filter(|q| q.from == ME && q.outbound == Outbound::Open)
        .map(|q| Entry {
            due: None,
            step: q.step,
            item: item(&q.id, &q.text),
        })
        .collect();
    let waits_counts = vec![
        count(
            "open request from me",
            "open requests from me",
            items(&requests_from_me),
        ),
        count(
            "order from me in progress",
            "orders from me in progress",
            items(&given),
        ),
    ];
    let waits = urgent(requests_from_me.into_iter().chain(given).collect());

    // 3. Decisions in force; constraints on its topics and paths.
    let decisions: Vec<Entry> = r
        .decisions
        .iter()
        .filter(|d| !d.superseded)
        .map(|d| Entry {
            due: None,
            step: d.step,
            item: item(&d.id, &d.text),
        })
        .collect();
    let mut mine: HashSet<String> = HashSet::new();
    mine.extend(
        r.requests
            .iter()
            .filter(|q| {
                (q.to == ME && q.inbound.open()) || (q.from == ME && q.outbound == Outbound::Open)
            })
            .map(|q| q.topic.clone()),
    );
    mine.extend(
        r.orders
            .iter()
            .filter(|o| o.state.open() && (o.to == ME || o.from == ME))
            .map(|o| o.topic.clone()),
    );
    mine.extend(
        r.notes
            .iter()
            .filter(|n| n.by == ME)
            .map(|n| n.path.clone()),
    );
    let constraints: Vec<Entry> = r
        .constraints
        .iter()
        .filter(|c| mine.contains(&c.on))
        .map(|c| Entry {
            due: None,
            step: c.step,
            item: item(&c.id, &c.text),
        })
        .collect();
    let state_counts = vec![
        count("decision in force", "decisions in force", items(&decisions)),
        count(
            "constraint on my topics and paths",
            "constraints on my topics and paths",
            items(&constraints),
        ),
    ];
    let state: Vec<Item> = newest(decisions)
        .into_iter()
        .chain(newest(constraints))
        .collect();

    // 4. Its stale notes (its newest on each path); its runs lost holding work.
    let mut seen: HashSet<&str> = HashSet::new();
    let mut stale: Vec<Entry> = Vec::new();
    for n in r.notes.iter().rev().filter(|n| n.by == ME) {
        if seen.insert(n.path.as_str()) && n.stale {
            stale.push(Entry {
                due: None,
                step: n.step,
                item: item(&n.id, &n.text),
            });
        }
    }
    let lost: Vec<Entry> = r
        .runs
        .iter()
        .filter(|run| run.who == ME && run.lost && !run.held.is_empty() && !run.alerts_acked)
        .map(|run| Entry {
            due: None,
            step: run.step,
            item: Item {
                id: run.id.clone(),
                text: None,
            },
        })
        .collect();
    let health_counts = vec![
        count("stale note of mine", "stale notes of mine", items(&stale)),
        count(
            "run lost holding work",
            "runs lost holding work",
            items(&lost),
        ),
    ];
    let health: Vec<Item> = newest(stale).into_iter().chain(newest(lost)).collect();

    // 5. The first action its last hand-over left.
    let next: Vec<Item> = r
        .resume_at
        .iter()
        .rev()
        .find(|(who, _)| who == ME)
        .map(|(_, text)| Item {
            id: text.clone(),
            text: Some(text.clone()),
        })
        .into_iter()
        .collect();

    Oracle {
        categories: vec![
            Category {
                name: "owes",
                must: owes,
                counts: owes_counts,
            },
            Category {
                name: "waits",
                must: waits,
                counts: waits_counts,
            },
            Category {
                name: "decisions/constraints",
                must: state,
                counts: state_counts,
            },
            Category {
                name: "stale/lost",
                must: health,
                counts: health_counts,
            },
            Category {
                name: "resume_at",
                must: next,
                counts: Vec::new(),
            },
        ],
        bad: bad(r),
    }
}

fn count(one: &'static str, many: &'static str, items: Vec<Item>) -> Count {
    Count { one, many, items }
}

/// What must not be shown as current: superseded decisions, stale notes (anyone's, and
/// the lead's older notes on a path it noted again), what ended, others' open work.
fn bad(r: &Record) -> Vec<Bad> {
    let mut bad = Vec::new();
    let mut push = |id: &str, text: Option<&str>, why: Why| {
        bad.push(Bad {
            item: Item {
                id: id.to_owned(),
                text: text.map(str::to_owned),
            },
            why,
        })
    };
    for d in r.decisions.iter().filter(|d| d.superseded) {
        push(&d.id, Some(&d.text), Why::Superseded);
    }
    for n in r.notes.iter().filter(|n| n.stale) {
        push(&n.id, Some(&n.text), Why::Stale);
    }
    for q in &r.requests {
        let mine = q.to == ME || q.from == ME;
        let ended = if q.to == ME {
            !q.inbound.open()
        } else if q.from == ME {
            q.outbound != Outbound::Open
        } else {
            !q.inbound.open()
        };
        if ended {
            push(&q.id, Some(&q.text), Why::Ended);
        } else if !mine {
            push(
                &q.id,
                Some(&q.text),
                Why::Theirs(vec![q.from.clone(), q.to.clone()]),
            );
        }
    }
    for i in r.infos.iter().filter(|i| i.to == ME && i.acked) {
        push(&i.id, Some(&i.text), Why::Ended);
    }
    for o in &r.orders {
        if !o.state.open() {
            push(&o.id, Some(&o.goal), Why::Ended);
        } else if o.from != ME && o.to != ME {
            push(
                &o.id,
                Some(&o.goal),
                Why::Theirs(vec![o.from.clone(), o.to.clone()]),
            );
        }
    }
    let orders_from: std::collections::HashMap<&str, &str> = r
        .orders
        .iter()
        .map(|o| (o.id.as_str(), o.from.as_str()))
        .collect();
    for n in &r.needs {
        let from = orders_from
            .get(n.order.as_str())
            .copied()
            .unwrap_or_default();
        if n.acked {
            push(&n.id, Some(&n.text), Why::Ended);
        } else if from != ME {
            push(
                &n.id,
                Some(&n.text),
                Why::Theirs(vec![from.to_owned(), n.by.clone()]),
            );
        }
    }
    for run in &r.runs {
        if run.lost && run.alerts_acked {
            for a in &run.alerts {
                push(a, None, Why::Ended);
            }
        }
        if run.ended {
            push(&run.id, None, Why::Ended);
        } else if run.who != ME {
            push(&run.id, None, Why::Theirs(vec![run.who.clone()]));
        }
    }
    for s in &r.sessions {
        if s.ended {
            push(&s.id, None, Why::Ended);
        } else if s.who != ME {
            push(&s.id, None, Why::Theirs(vec![s.who.clone()]));
        }
    }
    bad
}

/// What the oracle's record holds, in a line: the shape of the history.
pub fn shape(r: &Record) -> String {
    let open_to_me = r
        .requests
        .iter()
        .filter(|q| q.to == ME && q.inbound.open())
        .count();
    let superseded = r.decisions.iter().filter(|d| d.superseded).count();
    let stale = r.notes.iter().filter(|n| n.stale).count();
    let lost = r.runs.iter().filter(|run| run.lost).count();
    let unread = r
        .requests
        .iter()
        .filter(|q| q.inbound == Inbound::Pending)
        .count();
    format!(
        "{} requests ({open_to_me} open to {ME}, {unread} unread), {} infos, {} orders, \
         {} decisions ({superseded} superseded), {} constraints, {} notes ({stale} stale), \
         {} runs ({lost} lost), {} sessions, {} needs, {} receipts, {} commits, {} hooks",
        r.requests.len(),
        r.infos.len(),
        r.orders.len(),
        r.decisions.len(),
        r.constraints.len(),
        r.notes.len(),
        r.runs.len(),
        r.sessions.len(),
        r.needs.len(),
        r.receipts,
        r.commits,
        r.hooks
    )
}
