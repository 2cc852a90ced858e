//! Task texts as the overlap check sees them: the rubric's normalized words
//! (`reward::normalize::tokens`) as ids, each text's word set in one global
//! rarest-first order (what prefix filtering needs), and its word n-grams hashed.

use crate::reward::normalize::tokens;
use crate::trajectory::Task;
use crate::trajectory::import::tasks::site_name;
use rayon::prelude::*;
use std::collections::HashMap;

/// One task's text, ready for comparison.
#[derive(Debug, Clone)]
pub struct TaskText {
    /// Word ids in text order.
    pub words: Vec<u32>,
    /// Distinct words as ranks (rarest first), sorted ascending.
    pub set: Vec<u32>,
    /// The task's site (`site_name` of its website, else of its domain); empty when
    /// neither says.
    pub site: String,
}

/// The words of both task sets and their texts.
#[derive(Debug)]
pub struct Corpus {
    words: Vec<String>,
    /// Training tasks' texts, in input order.
    pub train: Vec<TaskText>,
    /// Benchmark tasks' texts, in input order.
    pub bench: Vec<TaskText>,
}

impl Corpus {
    /// Tokenizes both sets (in parallel) and orders the vocabulary by how many
    /// texts of either set hold each word, rarest first.
    pub fn build(train: &[Task], bench: &[Task]) -> Corpus {
        let tokenize = |ts: &[Task]| -> Vec<Vec<String>> {
            ts.par_iter().map(|t| tokens(&t.instruction)).collect()
        };
        let (train_tokens, bench_tokens) = (tokenize(train), tokenize(bench));
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<String> = Vec::new();
        let mut df: Vec<u32> = Vec::new();
        let mut to_ids = |all: Vec<Vec<String>>| -> Vec<Vec<u32>> {
            all.into_iter()
                .map(|toks| {
                    let seq: Vec<u32> = toks
                        .into_iter()
                        .map(|w| match ids.get(&w) {
                            Some(&id) => id,
                            None => {
                                let id = words.len() as u32;
                                ids.insert(w.clone(), id);
                                words.push(w);
                                df.push(0);
                                id
                            }
                        })
                        .collect();
                    let mut distinct = seq.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    for &id in &distinct {
                        df[id as usize] += 1;
                    }
                    seq
                })
                .collect()
        };
        let (train_ids, bench_ids) = (to_ids(train_tokens), to_ids(bench_tokens));
        let mut order: Vec<u32> = (0..words.len() as u32).collect();
        order.sort_unstable_by_key(|&id| (df[id as usize], id));
        let mut rank = vec![0u32; words.len()];
        for (r, &id) in order.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        let texts = |tasks: &[Task], seqs: Vec<Vec<u32>>| -> Vec<TaskText> {
            tasks
                .iter()
                .zip(seqs)
                .map(|(t, words)| {
                    let mut set: Vec<u32> = words.iter().map(|&w| rank[w as usize]).collect();
                    set.sort_unstable();
                    set.dedup();
                    TaskText {
                        words,
                        set,
                        site: site_of(t),
                    }
                })
                .collect()
        };
        Corpus {
            train: texts(train, train_ids),
            bench: texts(bench, bench_ids),
            words,
        }
    }

    /// The words of `ids`, joined by spaces.
    pub fn phrase(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| self.words[i as usize].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A task's site for the same-website check.
pub fn site_of(t: &Task) -> String {
    let from_site = site_name(&t.website);
    if from_site.is_empty() {
        site_name(&t.domain)
    } else {
        from_site
    }
}

/// A word n-gram's hash (FNV-1a over the ids, its length mixed in so that grams of
/// different lengths never share a key by construction).
pub fn gram_hash(gram: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ gram.len() as u64;
    for &w in gram {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The n-grams a text is compared by: its windows of `n` words, or its whole text
/// when it is shorter.
pub fn windows(words: &[u32], n: usize) -> impl Iterator<Item = &[u32]> {
    let len = n.min(words.len()).max(1);
    words.windows(len).filter(|w| !w.is_empty())
}

/// How many of a set's first (rarest) elements two sets with Jaccard ≥ `t` must
/// share one of: `|x| - ⌈t·|x|⌉ + 1`.
pub fn prefix_len(len: usize, t: f64) -> usize {
    if len == 0 {
        return 0;
    }
    let need = ((t * len as f64) - 1e-9).ceil().max(0.0) as usize;
    (len + 1).saturating_sub(need).clamp(1, len)
}

/// Jaccard similarity of two sorted, distinct word sets (1 when both are empty;
/// the check never compares two empty texts).
pub fn jaccard_sorted(a: &[u32], b: &[u32]) -> f64 {
    crate::util::sorted_set::jaccard(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn task(text: &str, website: &str) -> Task {
        Task {
            task_id: text.into(),
            website: website.into(),
            domain: String::new(),
            category: String::new(),
            instruction: text.into(),
            source: String::new(),
        }
    }

    #[test]
    fn words_are_normalized_and_ranked_rarest_first() {
        let c = Corpus::build(
            &[task("Find the CHEAPEST flight.", "https://www.kayak.com/x")],
            &[task("find the cheapest hotel", "kayak.com")],
        );
        assert_eq!(c.phrase(&c.train[0].words), "find the cheapest flight");
        assert_eq!(c.train[0].site, "kayak");
        assert_eq!(c.train[0].site, c.bench[0].site);
        // flight and hotel occur once, the rest twice: ranks 0 and 1 are theirs.
        assert_eq!(c.train[0].set[0], 0);
        assert_eq!(c.bench[0].set[0], 1);
        assert!((jaccard_sorted(&c.train[0].set, &c.bench[0].set) - 3.0 / 5.0).abs() < 1e-12);
    }

    #[test]
    fn short_texts_are_one_gram() {
        let w = [1, 2];
        assert_eq!(windows(&w, 4).collect::<Vec<_>>(), vec![&[1, 2][..]]);
        assert_eq!(windows(&[1, 2, 3], 2).count(), 2);
        assert_ne!(gram_hash(&[1, 2]), gram_hash(&[2, 1]));
    }

    proptest! {
        /// Prefix filtering never loses a pair at or above the threshold: two sets
        /// with Jaccard ≥ t share an element among their prefixes.
        #[test]
        fn prefixes_of_similar_sets_meet(
            a in proptest::collection::btree_set(0u32..40, 1..20),
            b in proptest::collection::btree_set(0u32..40, 1..20),
            t in 0.05f64..1.0,
        ) {
            let (a, b): (Vec<u32>, Vec<u32>) = (a.into_iter().collect(), b.into_iter().collect());
            if jaccard_sorted(&a, &b) >= t {
                let pa = &a[..prefix_len(a.len(), t)];
                let pb = &b[..prefix_len(b.len(), t)];
                prop_assert!(pa.iter().any(|x| pb.contains(x)));
            }
        }
    }
}
