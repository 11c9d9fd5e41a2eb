//! `cargo bench -p baton --bench negotiate`: the time to settle eight issues of eight
//! options (16,777,216 outcomes) with two, three and five parties — the engine alone
//! (`baton_core::negotiation::settle`), and `baton negotiate SPEC.json` as a whole process
//! (reading the files, one store transaction, printing).
//!
//! Each run is its own random instance, seeded so every bench run sees the same ones, with
//! two hard constraints and a veto for some parties. Two kinds: `random` (independent
//! utilities in [0, 1] and weights, floors at 55–90 % of each party's best: a zone of
//! agreement in some instances, none in others) and `opposed` (two camps with mirrored
//! utilities and the same weights, floors at 20–55 %: a wide zone where every gain for one
//! camp is a loss for the other — the mediator's hardest search). It prints a table
//! (median and max over the runs) and asserts nothing about time. Without `--bench` (as `cargo test --benches` runs it) it
//! does one run of each size, to check that it works.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use baton_core::negotiation::{Position, Resolution, Spec, settle};
use serde_json::{Map, Value, json};

mod support;
use support::baton;

const ISSUES: usize = 8;
const OPTIONS: usize = 8;
const RUNS: u64 = 9;
const NAMES: [&str; 5] = ["ann", "bob", "cy", "dee", "eve"];

/// A tiny xorshift generator: the instances need spread, not quality.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// In [0, 1), to four decimals (so the files read like hand-written ones).
    fn unit(&mut self) -> f64 {
        (self.next() % 10_000) as f64 / 10_000.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Random,
    Opposed,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::Opposed => "opposed",
        }
    }
}

/// One random instance: the spec (naming `NAME.json` position files) and the positions.
fn instance(id: &str, kind: Kind, parties: usize, seed: u64) -> (Value, Vec<(String, Value)>) {
    let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let issue = |i: usize| format!("i{i}");
    let option = |j: usize| format!("o{j}");
    let issues: Vec<Value> = (0..ISSUES)
        .map(|i| json!({"name": issue(i), "options": (0..OPTIONS).map(option).collect::<Vec<_>>()}))
        .collect();
    let constraints: Vec<Value> = (0..2)
        .map(|c| {
            let mut clause = Map::new();
            clause.insert(issue(2 * c), json!(option(rng.below(OPTIONS))));
            clause.insert(issue(2 * c + 1), json!(option(rng.below(OPTIONS))));
            Value::Object(clause)
        })
        .collect();
    let names = &NAMES[..parties];
    let spec = json!({
        "id": id, "rounds": 50, "issues": issues, "constraints": constraints,
        "parties": names.iter().map(|n| json!({"name": n, "position": format!("{n}.json")}))
            .collect::<Vec<_>>()
    });
    // The opposed camps' shared utilities and weights.
    let base: Vec<f64> = (0..ISSUES * OPTIONS).map(|_| rng.unit()).collect();
    let base_weights: Vec<f64> = (0..ISSUES).map(|_| rng.unit()).collect();
    let positions = names
        .iter()
        .enumerate()
        .map(|(p, name)| {
            let mut weights = Map::new();
            let mut utilities = Map::new();
            let mut best = 0.0;
            for i in 0..ISSUES {
                let w = match kind {
                    Kind::Random => rng.unit(),
                    Kind::Opposed => base_weights[i],
                };
                let mut per = Map::new();
                let mut top: f64 = 0.0;
                for j in 0..OPTIONS {
                    let u = match kind {
                        Kind::Random => rng.unit(),
                        Kind::Opposed => {
                            let mine = base[i * OPTIONS + j];
                            let camp = if p % 2 == 0 { mine } else { 1.0 - mine };
                            // Members of a camp differ a little.
                            (camp + 0.05 * (p / 2) as f64 * rng.unit()).min(1.0)
                        }
                    };
                    let u = (u * 10_000.0).round() / 10_000.0;
                    top = top.max(u);
                    per.insert(option(j), json!(u));
                }
                best += w * top;
                weights.insert(issue(i), json!(w));
                utilities.insert(issue(i), Value::Object(per));
            }
            let share = match kind {
                Kind::Random => 0.55 + 0.35 * rng.unit(),
                Kind::Opposed => 0.2 + 0.35 * rng.unit(),
            };
            let veto: Vec<Value> = if rng.below(2) == 0 {
                vec![json!({ issue(rng.below(ISSUES)): option(rng.below(OPTIONS)) })]
            } else {
                Vec::new()
            };
            let position = json!({"weights": weights, "utilities": utilities,
                                  "floor": (best * share * 10_000.0).round() / 10_000.0,
                                  "veto": veto});
            ((*name).to_owned(), position)
        })
        .collect();
    (spec, positions)
}

fn parsed(spec: &Value, positions: &[(String, Value)]) -> (Spec, BTreeMap<String, Position>) {
    let spec = Spec::from_value(spec).expect("a valid spec");
    let positions = positions
        .iter()
        .map(|(n, v)| (n.clone(), Position::from_value(v, &spec, n).expect("valid")))
        .collect();
    (spec, positions)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and max, in milliseconds.
fn summary(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    (
        ms(times[times.len() / 2]),
        ms(*times.last().expect("a run")),
    )
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs = if full { RUNS } else { 1 };
    let exe = Path::new(env!("CARGO_BIN_EXE_baton"));
    println!(
        "baton negotiate bench: {ISSUES} issues x {OPTIONS} options ({} outcomes) · {runs} \
         random instances per row · {}",
        OPTIONS.pow(ISSUES as u32),
        exe.display()
    );
    println!(
        "{:>7}  {:>7}  {:>9}  {:>6}  {:>16}  {:>13}  {:>17}  {:>14}",
        "kind",
        "parties",
        "agreed",
        "offers",
        "engine median ms",
        "engine max ms",
        "command median ms",
        "command max ms"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    baton(exe, project, &["init"]);
    // Every party is a participant.
    for name in NAMES {
        baton(exe, project, &["agent", "add", name, "--role", "executor"]);
    }
    for (kind, parties) in [Kind::Random, Kind::Opposed]
        .into_iter()
        .flat_map(|k| [2, 3, 5].map(|p| (k, p)))
    {
        let mut engine = Vec::new();
        let mut command = Vec::new();
        let mut agreed = 0;
        let mut offers = 0;
        for run in 0..runs {
            let id = format!("bench-{}-{parties}-{run}", kind.name());
            let (spec, positions) = instance(&id, kind, parties, 1000 * parties as u64 + run);
            let (s, p) = parsed(&spec, &positions);
            let t = Instant::now();
            let settled = settle(&s, &p);
            engine.push(t.elapsed());
            offers += settled.trail.len();
            if matches!(settled.resolution, Resolution::Agreement { .. }) {
                agreed += 1;
            }

            let files = project.join(&id);
            std::fs::create_dir_all(&files).expect("a directory for the files");
            for (name, position) in &positions {
                std::fs::write(files.join(format!("{name}.json")), position.to_string())
                    .expect("write a position");
            }
            let spec_path = files.join("spec.json");
            std::fs::write(&spec_path, spec.to_string()).expect("write the spec");
            let t = Instant::now();
            let out = Command::new(exe)
                .args(["negotiate", spec_path.to_str().expect("a UTF-8 path")])
                .current_dir(project)
                .env_remove("BATON_PROJECT")
                .env_remove("BATON_AS")
                .output()
                .expect("run baton");
            command.push(t.elapsed());
            // 0 is an agreement, 2 a walk-away: both are answers.
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 2)),
                "baton negotiate exited {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (engine_median, engine_max) = summary(engine);
        let (command_median, command_max) = summary(command);
        println!(
            "{:>7}  {parties:>7}  {:>9}  {:>6.1}  {engine_median:>16.1}  {engine_max:>13.1}  \
             {command_median:>17.1}  {command_max:>14.1}",
            kind.name(),
            format!("{agreed}/{runs}"),
            offers as f64 / runs as f64,
        );
    }
}
