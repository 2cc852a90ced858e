//! Prompts encoded recently, kept so that a new prompt encodes only what follows the
//! longest prefix it shares with one of them.

use crate::model::prefix::common_prefix_len;
use crate::model::{Decoder, KvCache};
use anyhow::Result;
use candle_core::Tensor;
use std::collections::VecDeque;

/// Shortest shared prefix worth copying a cache for.
const MIN_SHARED: usize = 8;

/// The caches of recent prompts (batch 1), least recently used first, holding at most
/// `budget` positions in all.
pub(super) struct PromptStore {
    entries: VecDeque<(Vec<u32>, KvCache)>,
    budget: usize,
}

impl PromptStore {
    pub fn new(budget: usize) -> PromptStore {
        PromptStore {
            entries: VecDeque::new(),
            budget,
        }
    }

    /// The cache of `prompt` at positions `0 .. len` and the logits after its last
    /// token `(1, vocab)`; keeps the cache for later prompts.
    pub fn encode(&mut self, model: &Decoder, prompt: &[u32]) -> Result<(KvCache, Tensor)> {
        let best = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (ids, _))| {
                // At least the last token is encoded: its logits start the decoding.
                (i, common_prefix_len(&[ids, prompt]).min(prompt.len() - 1))
            })
            .max_by_key(|&(i, shared)| (shared, i));
        let (mut cache, start) = match best {
            Some((i, shared)) if shared >= MIN_SHARED => {
                let (_, kept) = &self.entries[i];
                let one = Tensor::new(&[0u32], model.device())?;
                let mut c = kept.select_batch(&one)?;
                c.truncate(shared)?;
                (c, shared)
            }
            _ => (KvCache::for_decoding_with_headroom(1), 0),
        };
        let rest = &prompt[start..];
        let input = Tensor::new(rest, model.device())?.unsqueeze(0)?;
        let hidden = model.forward_hidden(&input, start, Some(&mut cache))?;
        let logits = model
            .logits(&hidden.narrow(1, rest.len() - 1, 1)?)?
            .squeeze(1)?;
        self.keep(prompt, &cache);
        Ok((cache, logits))
    }

    /// Keeps `cache` as `prompt`'s (the caller never writes into it in place: the
    /// batch copies what it takes), dropping the least recently used past the budget.
    fn keep(&mut self, prompt: &[u32], cache: &KvCache) {
        if prompt.len() > self.budget {
            return;
        }
        self.entries.retain(|(ids, _)| ids != prompt);
        self.entries.push_back((prompt.to_vec(), cache.clone()));
        let mut used: usize = self.entries.iter().map(|(ids, _)| ids.len()).sum();
        while used > self.budget {
            match self.entries.pop_front() {
                Some((ids, _)) => used -= ids.len(),
                None => break,
            }
        }
    }
}
