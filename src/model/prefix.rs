//! Keys and values of a token prefix, encoded once and reused by every decoding that
//! continues it: the system prompt all RL prompts start with ([`PrefixCache`]), and
//! the part of a policy's next prompt that agrees with its last one ([`PromptReuse`]).
//!
//! Both hold decoding caches ([`KvCache::for_decoding`]): valid only while the model's
//! weights stay as they were when the prefix was encoded.

use super::decoder::{Decoder, KvCache};
use anyhow::Result;
use candle_core::Tensor;
use std::sync::Mutex;

/// Length of the longest prefix every sequence of `seqs` shares (0 for none).
pub fn common_prefix_len(seqs: &[&[u32]]) -> usize {
    let Some((first, rest)) = seqs.split_first() else {
        return 0;
    };
    rest.iter().fold(first.len(), |n, s| {
        first[..n]
            .iter()
            .zip(*s)
            .take_while(|(a, b)| a == b)
            .count()
    })
}

/// [`common_prefix_len`] short of the shortest sequence's end, so that every sequence
/// keeps at least one token after it (the one whose logits a decoding or a scored
/// response starts from).
pub fn shared_prefix_len(seqs: &[&[u32]]) -> usize {
    let shortest = seqs.iter().map(|s| s.len()).min().unwrap_or(0);
    common_prefix_len(seqs).min(shortest.saturating_sub(1))
}

/// The decoding cache of one token prefix (batch 1), copied for each batch of
/// decodings that continues it.
pub struct PrefixCache {
    ids: Vec<u32>,
    cache: KvCache,
    device: candle_core::Device,
}

impl PrefixCache {
    /// Encodes `ids` into a decoding cache whose buffers hold `headroom` more
    /// positions before they grow.
    pub fn encode(model: &Decoder, ids: &[u32], headroom: usize) -> Result<Self> {
        anyhow::ensure!(!ids.is_empty(), "empty prefix");
        let mut cache = KvCache::for_decoding_with_headroom(headroom);
        let input = Tensor::new(ids, model.device())?.unsqueeze(0)?;
        model.forward_hidden(&input, 0, Some(&mut cache))?;
        Ok(PrefixCache {
            ids: ids.to_vec(),
            cache,
            device: model.device().clone(),
        })
    }

    /// The prefix's token ids.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Its length in tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Never true: an empty prefix is refused by [`Self::encode`].
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `prompt` starts with the prefix and has at least one token after it
    /// (the token whose logits start the decoding).
    pub fn continued_by(&self, prompt: &[u32]) -> bool {
        prompt.len() > self.ids.len() && prompt.starts_with(&self.ids)
    }

    /// A cache of `batch` rows, each its own copy of the prefix (decoding writes into
    /// its buffers in place).
    pub fn copies(&self, batch: usize) -> Result<KvCache> {
        let idx = Tensor::from_vec(vec![0u32; batch], batch, &self.device)?;
        Ok(self.cache.select_batch(&idx)?)
    }
}

/// The decoding cache of the last prompt a model decoded, so that the next prompt
/// encodes only what differs from it (its steps share the system prompt, the task and
/// most of the page). Safe to share between threads: a decoding that finds the cache
/// in use by another starts from scratch.
#[derive(Default)]
pub struct PromptReuse {
    last: Mutex<Option<(Vec<u32>, KvCache)>>,
}

impl PromptReuse {
    /// A decoding cache holding the first positions of `prompt` (those it shares with
    /// the last prompt kept, all but its last token at most), and how many.
    pub fn take(&self, prompt: &[u32]) -> Result<(KvCache, usize)> {
        let last = self.last.try_lock().ok().and_then(|mut g| g.take());
        let Some((ids, mut cache)) = last else {
            return Ok((KvCache::for_decoding(), 0));
        };
        let keep = common_prefix_len(&[&ids, prompt]).min(prompt.len().saturating_sub(1));
        if keep == 0 {
            return Ok((KvCache::for_decoding(), 0));
        }
        cache.truncate(keep)?;
        Ok((cache, keep))
    }

    /// Keeps `cache`, whose first positions hold `prompt`, for the next [`Self::take`].
    pub fn keep(&self, prompt: Vec<u32>, cache: KvCache) {
        if let Ok(mut g) = self.last.try_lock() {
            *g = Some((prompt, cache));
        }
    }

    /// Forgets the kept cache (call it when the model's weights change).
    pub fn clear(&self) {
        if let Ok(mut g) = self.last.lock() {
            *g = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_of_token_sequences() {
        assert_eq!(common_prefix_len(&[]), 0);
        assert_eq!(common_prefix_len(&[&[1, 2, 3]]), 3);
        assert_eq!(common_prefix_len(&[&[1, 2, 3], &[1, 2, 4], &[1, 2]]), 2);
        assert_eq!(common_prefix_len(&[&[1, 2], &[2, 1]]), 0);
        assert_eq!(shared_prefix_len(&[&[1, 2, 3], &[1, 2, 4], &[1, 2]]), 1);
        assert_eq!(shared_prefix_len(&[&[1, 2, 3], &[1, 2, 3, 4]]), 2);
        assert_eq!(shared_prefix_len(&[]), 0);
    }
}
