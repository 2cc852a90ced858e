//! The lexical-overlap check of a training task set against a benchmark's tasks.
//!
//! Every training task is compared with every benchmark task it could overlap, found
//! through two indexes of the benchmark instead of all pairs: an n-gram index (a
//! pair with containment above 0 shares an n-gram) and a prefix-filter index over
//! the word sets in rarest-first order (a pair with Jaccard ≥ t shares a word among
//! both sets' first `|x| - ⌈t·|x|⌉ + 1`; see `text_index::prefix_len`). Both are
//! exact filters, so no flagged pair is missed; the work grows with the training set
//! times the few benchmark tasks each training task shares a rare word or an n-gram
//! with.

use super::overlap_config::OverlapConfig;
use super::text_index::{Corpus, TaskText, gram_hash, jaccard_sorted, prefix_len, windows};
use crate::trajectory::Task;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// One training task set against one benchmark task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// Index of the training task in the input.
    pub train: usize,
    /// Index of the benchmark task in the input.
    pub bench: usize,
    /// Share of the benchmark task's distinct n-grams found in the training task.
    pub containment: f64,
    /// Jaccard similarity of the two word sets.
    pub jaccard: f64,
    /// Both tasks name the same site.
    pub same_site: bool,
    /// The shared n-grams (at most the config's `max_evidence`), benchmark order.
    pub shared: Vec<String>,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Overlap {
    /// Pairs at or over a threshold, by training task then benchmark task.
    pub flagged: Vec<Pair>,
    /// The closest pairs under every threshold (by the larger of the two scores),
    /// so a clean result shows how far from the line it was.
    pub closest: Vec<Pair>,
    /// Pairs scored (the rest could not reach any threshold).
    pub candidates: usize,
    /// Training tasks with no words after normalization (nothing to compare).
    pub empty_train: usize,
}

impl Overlap {
    /// Indexes of the training tasks in a flagged pair, ascending.
    pub fn flagged_train(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.flagged.iter().map(|p| p.train).collect();
        v.dedup();
        v
    }

    /// How many benchmark tasks a flagged pair names.
    pub fn benchmark_hit(&self) -> usize {
        self.flagged
            .iter()
            .map(|p| p.bench)
            .collect::<HashSet<_>>()
            .len()
    }
}

/// How many closest unflagged pairs a result keeps.
const CLOSEST: usize = 5;

struct BenchIndex {
    grams: HashMap<u64, Vec<u32>>,
    distinct_grams: Vec<u32>,
    /// Gram lengths of benchmark texts shorter than n (each is one gram).
    short_lens: Vec<usize>,
    /// Rank → benchmark tasks holding it in their prefix.
    prefix: HashMap<u32, Vec<u32>>,
}

impl BenchIndex {
    fn build(bench: &[TaskText], cfg: &OverlapConfig) -> BenchIndex {
        let mut idx = BenchIndex {
            grams: HashMap::new(),
            distinct_grams: Vec::with_capacity(bench.len()),
            short_lens: Vec::new(),
            prefix: HashMap::new(),
        };
        for (b, t) in bench.iter().enumerate() {
            let mut hs: Vec<u64> = windows(&t.words, cfg.ngram).map(gram_hash).collect();
            hs.sort_unstable();
            hs.dedup();
            idx.distinct_grams.push(hs.len() as u32);
            for h in hs {
                idx.grams.entry(h).or_default().push(b as u32);
            }
            if !t.words.is_empty() && t.words.len() < cfg.ngram {
                idx.short_lens.push(t.words.len());
            }
            for &r in &t.set[..prefix_len(t.set.len(), cfg.min_jaccard())] {
                idx.prefix.entry(r).or_default().push(b as u32);
            }
        }
        idx.short_lens.sort_unstable();
        idx.short_lens.dedup();
        idx
    }
}

/// Per-thread counters, reset after each training task.
struct Scratch {
    hits: Vec<u32>,
    seen: Vec<bool>,
    touched: Vec<u32>,
}

impl Scratch {
    /// Marks benchmark task `b` as a candidate.
    fn touch(&mut self, b: u32) {
        if !self.seen[b as usize] {
            self.seen[b as usize] = true;
            self.touched.push(b);
        }
    }

    /// The candidates of `text`: the benchmark tasks sharing an n-gram with it
    /// (counted in `hits`) or one of its prefix-filter tokens (a pair at the
    /// Jaccard threshold shares one).
    fn gather(&mut self, text: &TaskText, index: &BenchIndex, cfg: &OverlapConfig) {
        let mut hs: Vec<u64> = Vec::new();
        for len in index
            .short_lens
            .iter()
            .copied()
            .chain([cfg.ngram])
            .filter(|&l| l <= text.words.len())
        {
            hs.extend(text.words.windows(len).map(gram_hash));
        }
        hs.sort_unstable();
        hs.dedup();
        for h in &hs {
            for &b in index.grams.get(h).map_or(&[][..], Vec::as_slice) {
                self.touch(b);
                self.hits[b as usize] += 1;
            }
        }
        for r in &text.set[..prefix_len(text.set.len(), cfg.min_jaccard())] {
            for &b in index.prefix.get(r).map_or(&[][..], Vec::as_slice) {
                self.touch(b);
            }
        }
    }
}

/// Compares every training task with the benchmark's.
pub fn find_overlaps(train: &[Task], bench: &[Task], cfg: &OverlapConfig) -> Overlap {
    let corpus = Corpus::build(train, bench);
    let index = BenchIndex::build(&corpus.bench, cfg);
    let per_task: Vec<(Vec<Pair>, Vec<Pair>, usize)> = (0..corpus.train.len())
        .into_par_iter()
        .map_init(
            || Scratch {
                hits: vec![0; corpus.bench.len()],
                seen: vec![false; corpus.bench.len()],
                touched: Vec::new(),
            },
            |s, t| compare_one(&corpus, &index, cfg, t, s),
        )
        .collect();
    let mut out = Overlap {
        empty_train: corpus.train.iter().filter(|t| t.words.is_empty()).count(),
        ..Overlap::default()
    };
    for (flagged, near, n) in per_task {
        out.flagged.extend(flagged);
        out.closest.extend(near);
        out.candidates += n;
    }
    out.closest.sort_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then(a.train.cmp(&b.train))
            .then(a.bench.cmp(&b.bench))
    });
    out.closest.truncate(CLOSEST);
    for p in &mut out.closest {
        p.shared = shared_grams(&corpus, cfg, p.train, p.bench).1;
    }
    out
}

fn score(p: &Pair) -> f64 {
    p.containment.max(p.jaccard)
}

/// One training task against its candidates: its flagged pairs, its closest
/// unflagged pair (if any) and how many candidates it had.
fn compare_one(
    corpus: &Corpus,
    index: &BenchIndex,
    cfg: &OverlapConfig,
    t: usize,
    s: &mut Scratch,
) -> (Vec<Pair>, Vec<Pair>, usize) {
    let text = &corpus.train[t];
    if text.words.is_empty() {
        return (Vec::new(), Vec::new(), 0);
    }
    s.gather(text, index, cfg);
    let mut flagged = Vec::new();
    let mut nearest: Option<Pair> = None;
    let candidates = s.touched.len();
    s.touched.sort_unstable();
    for &b in &s.touched {
        let bi = b as usize;
        let other = &corpus.bench[bi];
        let same_site = !text.site.is_empty() && text.site == other.site;
        let jaccard = jaccard_sorted(&text.set, &other.set);
        let grams = index.distinct_grams[bi].max(1);
        let containment = f64::from(s.hits[bi].min(grams)) / f64::from(grams);
        let mut pair = Pair {
            train: t,
            bench: bi,
            containment,
            jaccard,
            same_site,
            shared: Vec::new(),
        };
        let (c_min, j_min) = cfg.thresholds(same_site);
        if containment >= c_min || jaccard >= j_min {
            // Exact n-grams: a hash collision can only have raised the count.
            let (exact, shared) = shared_grams(corpus, cfg, t, bi);
            pair.containment = exact;
            pair.shared = shared;
            if pair.containment >= c_min || jaccard >= j_min {
                flagged.push(pair);
                continue;
            }
        }
        if nearest.as_ref().is_none_or(|n| score(&pair) > score(n)) {
            nearest = Some(pair);
        }
    }
    for &b in &s.touched {
        s.hits[b as usize] = 0;
        s.seen[b as usize] = false;
    }
    s.touched.clear();
    (flagged, nearest.into_iter().collect(), candidates)
}

/// Exact containment of benchmark task `b`'s n-grams in training task `t`, and the
/// shared ones as text (at most `max_evidence`).
fn shared_grams(corpus: &Corpus, cfg: &OverlapConfig, t: usize, b: usize) -> (f64, Vec<String>) {
    let (tw, bw) = (&corpus.train[t].words, &corpus.bench[b].words);
    if bw.is_empty() {
        return (0.0, Vec::new());
    }
    let len = cfg.ngram.min(bw.len());
    let in_train: HashSet<&[u32]> = tw.windows(len).collect();
    let mut distinct: Vec<&[u32]> = Vec::new();
    for g in windows(bw, cfg.ngram) {
        if !distinct.contains(&g) {
            distinct.push(g);
        }
    }
    let shared: Vec<&[u32]> = distinct
        .iter()
        .copied()
        .filter(|g| in_train.contains(g))
        .collect();
    let containment = shared.len() as f64 / distinct.len() as f64;
    let text = shared
        .iter()
        .take(cfg.max_evidence)
        .map(|g| corpus.phrase(g))
        .collect();
    (containment, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn task(id: &str, text: &str, website: &str) -> Task {
        Task {
            task_id: id.into(),
            website: website.into(),
            domain: String::new(),
            category: String::new(),
            instruction: text.into(),
            source: String::new(),
        }
    }

    #[test]
    fn a_copied_benchmark_task_is_flagged_with_its_shared_ngrams() {
        let bench = [
            task(
                "b0",
                "What is the top-1 best-selling product in 2022",
                "__SHOPPING_ADMIN__",
            ),
            task("b1", "Tell me the closest restaurant to CMU", "__MAP__"),
        ];
        let train = [
            task(
                "t0",
                "Please tell me: what is the top-1 best-selling product in 2022?",
                "",
            ),
            task(
                "t1",
                "Book a flight from Paris to Rome",
                "https://kayak.com",
            ),
            task("t2", "", ""),
        ];
        let o = find_overlaps(&train, &bench, &OverlapConfig::default());
        assert_eq!(o.flagged.len(), 1, "{o:?}");
        let p = &o.flagged[0];
        assert_eq!((p.train, p.bench), (0, 0));
        assert_eq!(p.containment, 1.0);
        assert_eq!(p.shared[0], "what is the top-1");
        assert_eq!(o.flagged_train(), vec![0]);
        assert_eq!(o.benchmark_hit(), 1);
        assert_eq!(o.empty_train, 1);
    }

    #[test]
    fn the_same_site_is_held_to_the_lower_thresholds() {
        // Jaccard 2/4 = 0.5: under 0.7, at the same-site 0.5.
        let bench = [task("b", "find cheapest flight", "https://www.kayak.com")];
        let other_site = [task("t", "find cheapest hotel", "https://www.expedia.com")];
        let same_site = [task("t", "find cheapest hotel", "https://kayak.com/hotels")];
        let cfg = OverlapConfig::default();
        let o = find_overlaps(&other_site, &bench, &cfg);
        assert!(o.flagged.is_empty());
        assert!((o.closest[0].jaccard - 0.5).abs() < 1e-12, "{o:?}");
        let o = find_overlaps(&same_site, &bench, &cfg);
        assert_eq!(o.flagged.len(), 1);
        assert!(o.flagged[0].same_site);
    }

    /// The same pairs as comparing every training task with every benchmark task.
    fn brute_force(train: &[Task], bench: &[Task], cfg: &OverlapConfig) -> Vec<(usize, usize)> {
        let corpus = Corpus::build(train, bench);
        let mut out = Vec::new();
        for (t, tt) in corpus.train.iter().enumerate() {
            if tt.words.is_empty() {
                continue;
            }
            for (b, bt) in corpus.bench.iter().enumerate() {
                let same = !tt.site.is_empty() && tt.site == bt.site;
                let (c_min, j_min) = cfg.thresholds(same);
                let j = jaccard_sorted(&tt.set, &bt.set);
                let c = shared_grams(&corpus, cfg, t, b).0;
                if c >= c_min || j >= j_min {
                    out.push((t, b));
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_indexes_find_what_all_pairs_find(
            train in proptest::collection::vec((proptest::collection::vec(0usize..12, 0..9), 0usize..3), 1..12),
            bench in proptest::collection::vec((proptest::collection::vec(0usize..12, 1..9), 0usize..3), 1..8),
            ngram in 1usize..5,
        ) {
            const W: [&str; 12] = ["find", "the", "cheapest", "flight", "to", "rome",
                "book", "a", "hotel", "in", "paris", "review"];
            const S: [&str; 3] = ["", "kayak.com", "expedia.com"];
            let mk = |v: &[(Vec<usize>, usize)]| -> Vec<Task> {
                v.iter().enumerate().map(|(i, (ws, s))| {
                    let text: Vec<&str> = ws.iter().map(|&w| W[w]).collect();
                    task(&i.to_string(), &text.join(" "), S[*s])
                }).collect()
            };
            let (train, bench) = (mk(&train), mk(&bench));
            let cfg = OverlapConfig { ngram, ..OverlapConfig::default() };
            let found: Vec<(usize, usize)> =
                find_overlaps(&train, &bench, &cfg).flagged.iter().map(|p| (p.train, p.bench)).collect();
            prop_assert_eq!(found, brute_force(&train, &bench, &cfg));
        }
    }
}
