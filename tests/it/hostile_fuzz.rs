//! Proptest-driven fuzzing of the four hostile-input readers: the action parser, the
//! Browser Use importer, the JSON Lines reader and `rl groups` input. Inputs are the
//! seeds of `tests/data/hostile/` spliced, cut and byte-flipped; each property says
//! what must hold for every input (no panic, and the answer is consistent), so a
//! failure prints the input that broke it. `PROPTEST_CASES` raises the count.

use proptest::prelude::*;
use rmsweb::action::parse::parse_response;
use rmsweb::train::rl::groups::{GroupStats, advantages, parse_group_line};
use rmsweb::trajectory::import::browser_use;
use rmsweb::trajectory::jsonl::JsonlFile;
use std::path::{Path, PathBuf};

/// The seed files of one corpus folder, as bytes.
fn seeds(folder: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hostile")
        .join(folder);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// One mutation of a seed: cut at a point, flip a byte, splice another seed's bytes in.
#[derive(Debug, Clone)]
enum Mutation {
    Cut(usize),
    Flip(usize, u8),
    Splice(usize, usize, usize),
    Repeat(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, b, c)| Mutation::Splice(a, b, c)),
        (any::<usize>(), 1..64usize, 2..200usize).prop_map(|(a, l, n)| Mutation::Repeat(a, l, n)),
    ]
}

/// Applies mutations to seed `pick` of `seeds`.
fn mutate(seeds: &[Vec<u8>], pick: usize, muts: &[Mutation]) -> Vec<u8> {
    let mut b = seeds[pick % seeds.len()].clone();
    for m in muts {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *m {
            Mutation::Cut(i) => b.truncate(at(i, b.len())),
            Mutation::Flip(i, x) if !b.is_empty() => {
                let k = i % b.len();
                b[k] ^= x;
            }
            Mutation::Flip(..) => {}
            Mutation::Splice(i, other, from) => {
                let o = &seeds[other % seeds.len()];
                let from = at(from, o.len());
                let tail = b.split_off(at(i, b.len()));
                b.extend_from_slice(&o[from..]);
                b.extend(tail);
            }
            Mutation::Repeat(i, len, n) => {
                let k = at(i, b.len());
                let piece: Vec<u8> = b[k..(k + len).min(b.len())].to_vec();
                let tail = b.split_off(k);
                b.extend(piece.repeat(n));
                b.extend(tail);
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The parser answers every mutated candidate, and an error points inside the text.
    #[test]
    fn the_action_parser_answers_every_candidate(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let text = String::from_utf8_lossy(&mutate(&seeds("parse"), pick, &muts)).into_owned();
        match parse_response(&text) {
            Ok(p) => prop_assert!(p.action_span.end <= text.len()),
            Err(e) => prop_assert!(e.offset.is_none_or(|o| o <= text.len()), "{:?}", e.offset),
        }
    }

    /// The Browser Use history parser never panics on mutated histories.
    #[test]
    fn the_browser_use_parser_never_panics(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("browser_use"), pick, &muts);
        let _ = browser_use::parse_history_bytes(&bytes, Path::new("h.json"));
    }

    /// `rl groups` input: a line it accepts always gives finite statistics.
    #[test]
    fn accepted_reward_groups_have_finite_statistics(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("groups"), pick, &muts);
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Ok((_, rewards)) = parse_group_line(line)
                && let Some(st) = GroupStats::of(&rewards)
            {
                prop_assert!(st.mean.is_finite() && st.std.is_finite(), "{line}");
                prop_assert!(advantages(&rewards, &st).iter().all(|a| a.is_finite()), "{line}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The JSON Lines reader indexes any file; every record it lists can be read back
    /// (parsed or refused with its line), and an unterminated last record parses.
    #[test]
    fn the_jsonl_reader_reads_back_every_record_it_lists(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 0..6)) {
        let bytes = mutate(&seeds("jsonl"), pick, &muts);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, &bytes).unwrap();
        let f = JsonlFile::open(&p).unwrap();
        for i in 0..f.len() {
            prop_assert!(f.raw(i).is_some());
            if let Err(e) = f.get::<serde_json::Value>(i) {
                prop_assert!(e.line > 0);
            }
        }
        if f.last_record_unterminated() {
            let raw = f.raw(f.len() - 1).unwrap();
            prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&raw).is_ok());
        }
        prop_assert!(!(f.last_record_unterminated() && f.torn_tail().is_some()));
    }
}
