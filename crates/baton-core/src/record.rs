//! Track records: per worker, computed from the log — first-time approvals,
//! rework rounds, failures, expiries, INVALID verdicts and budget spent. The caller
//! gathers each order's and run's facts; this module only counts.

use std::collections::BTreeMap;

use serde::Serialize;

/// One order as the record counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderFacts {
    /// The worker (the order's `to`).
    pub worker: String,
    pub approved: bool,
    pub expired: bool,
    /// Rework steps taken on it.
    pub reworks: u32,
    /// The `cost.usd` of every report on it.
    pub usd: f64,
}

/// One run as the record counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    pub worker: String,
    /// Failed or lost.
    pub failed: bool,
    pub tokens: Option<u64>,
}

/// A worker's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TrackRecord {
    pub worker: String,
    pub orders: u32,
    /// Approved without a rework.
    pub first_time_approvals: u32,
    pub rework_rounds: u32,
    /// Runs that failed or were lost.
    pub failures: u32,
    pub expiries: u32,
    /// Verdicts outside the grammar, when the worker reviewed (a reviewer command).
    pub invalid_verdicts: u32,
    pub tokens: u64,
    pub usd: f64,
}

/// Every worker's record, by name; `invalid` names the reviewer of each INVALID verdict.
pub fn track_records(
    orders: &[OrderFacts],
    runs: &[RunFacts],
    invalid: &[String],
) -> Vec<TrackRecord> {
    let mut by: BTreeMap<String, TrackRecord> = BTreeMap::new();
    fn entry<'a>(by: &'a mut BTreeMap<String, TrackRecord>, w: &str) -> &'a mut TrackRecord {
        by.entry(w.to_owned()).or_insert_with(|| TrackRecord {
            worker: w.to_owned(),
            ..TrackRecord::default()
        })
    }
    for o in orders {
        let r = entry(&mut by, &o.worker);
        r.orders += 1;
        r.rework_rounds += o.reworks;
        r.first_time_approvals += u32::from(o.approved && o.reworks == 0);
        r.expiries += u32::from(o.expired);
        r.usd += o.usd;
    }
    for run in runs {
        let r = entry(&mut by, &run.worker);
        r.failures += u32::from(run.failed);
        r.tokens += run.tokens.unwrap_or(0);
    }
    for reviewer in invalid {
        entry(&mut by, reviewer).invalid_verdicts += 1;
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(worker: &str, approved: bool, expired: bool, reworks: u32) -> OrderFacts {
        OrderFacts {
            worker: worker.into(),
            approved,
            expired,
            reworks,
            usd: 1.5,
        }
    }

    #[test]
    fn a_record_counts_each_fact_for_its_worker() {
        let records = track_records(
            &[
                order("a", true, false, 0),
                order("a", true, false, 1),
                order("a", false, true, 0),
                order("b", true, false, 0),
            ],
            &[
                RunFacts {
                    worker: "a".into(),
                    failed: true,
                    tokens: Some(100),
                },
                RunFacts {
                    worker: "a".into(),
                    failed: false,
                    tokens: None,
                },
            ],
            &["sh review.sh".into(), "sh review.sh".into()],
        );
        let a = &records[0];
        assert_eq!(
            (
                a.worker.as_str(),
                a.orders,
                a.first_time_approvals,
                a.rework_rounds
            ),
            ("a", 3, 1, 1)
        );
        assert_eq!((a.failures, a.expiries, a.tokens, a.usd), (1, 1, 100, 4.5));
        assert_eq!(records[1].first_time_approvals, 1);
        assert_eq!(records[2].worker, "sh review.sh");
        assert_eq!(records[2].invalid_verdicts, 2);
    }
}
