//! Every fuzz target over its committed corpus (the seeds, and each input a fuzzing run
//! found that once failed), then over a fixed budget of inputs made by mutating the
//! seeds: what `cargo test` can hold every parser at the boundary to without a fuzzer.

use std::path::PathBuf;

use proptest::prelude::*;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn every_target_has_seeds_and_takes_each_without_a_panic() {
    for (target, run) in baton_fuzz::TARGETS {
        let seeds = corpus(target);
        assert!(seeds.len() >= 3, "{target}: at least three seeds");
        for seed in &seeds {
            run(seed);
        }
    }
}

/// One edit of a seed: a byte changed, bytes inserted or removed, or a piece of another
/// seed spliced in.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Splice(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Set(at, b)),
        (
            any::<usize>(),
            prop::collection::vec(
                prop_oneof![
                    any::<u8>(),
                    prop::sample::select(b"{}[]\",:\\0123456789-.eE \n|#<>!tfn".to_vec())
                ],
                1..8
            )
        )
            .prop_map(|(at, bytes)| Edit::Insert(at, bytes)),
        (any::<usize>(), 1..16usize).prop_map(|(at, n)| Edit::Remove(at, n)),
        (any::<usize>(), any::<usize>(), 1..64usize)
            .prop_map(|(seed, at, n)| Edit::Splice(seed, at, n)),
    ]
}

fn mutate(seeds: &[Vec<u8>], pick: usize, edits: &[Edit]) -> Vec<u8> {
    let mut data = seeds[pick % seeds.len()].clone();
    for e in edits {
        let len = data.len();
        match e {
            Edit::Set(at, b) if len > 0 => data[at % len] = *b,
            Edit::Set(..) => data.push(0),
            Edit::Insert(at, bytes) => {
                let at = at % (len + 1);
                data.splice(at..at, bytes.iter().copied());
            }
            Edit::Remove(at, n) if len > 0 => {
                let at = at % len;
                data.drain(at..(at + n).min(len));
            }
            Edit::Remove(..) => {}
            Edit::Splice(seed, at, n) => {
                let other = &seeds[seed % seeds.len()];
                if other.is_empty() {
                    continue;
                }
                let from = at % other.len();
                let piece = other[from..(from + n).min(other.len())].to_vec();
                let at = at % (len + 1);
                data.splice(at..at, piece);
            }
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_target_takes_mutated_seeds_without_a_panic(
        target in 0..baton_fuzz::TARGETS.len(),
        pick in any::<usize>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let (name, run) = baton_fuzz::TARGETS[target];
        let seeds = corpus(name);
        run(&mutate(&seeds, pick, &edits));
    }

    #[test]
    fn every_target_takes_arbitrary_bytes_without_a_panic(
        target in 0..baton_fuzz::TARGETS.len(),
        data in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        (baton_fuzz::TARGETS[target].1)(&data);
    }
}
