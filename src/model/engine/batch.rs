//! The running batch: rows of different lengths aligned at their last position.
//!
//! The cache holds `T` columns standing for positions `pos - T .. pos`; row `r`'s
//! first `pads[r]` columns are padding (masked out of attention). Rotary embeddings
//! are relative, so where a row's keys sit in absolute positions does not change its
//! results, only the distances between them do: a joining prompt encoded at positions
//! `0 .. L` is turned by `pos - L` to end where the batch does, or, when it is the
//! longer, the batch is turned forward to end where it does. When the next position
//! would pass the model's table, the whole cache is turned back to start at 0.

use super::row::Row;
use super::{Core, Event, Job};
use crate::model::KvCache;
use crate::model::kv_cache::left_pad_mask;
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// Positions a new batch buffer holds beyond its longest row before it grows.
const HEADROOM: usize = 64;

/// The rows being decoded and their cache.
#[derive(Default)]
pub(super) struct Running {
    rows: Vec<Row>,
    /// Leading padding columns of each row.
    pads: Vec<usize>,
    cache: KvCache,
    /// The position the next token is decoded at.
    pos: usize,
    /// Logits `(rows, vocab)` the rows' next tokens are chosen from.
    last: Option<Tensor>,
}

/// A prompt encoded on its own: its cache at positions `0 .. len` and the logits
/// after its last token `(1, vocab)`.
struct Encoded {
    job: Arc<Job>,
    cache: KvCache,
    logits: Tensor,
    len: usize,
}

impl Running {
    /// Whether no row is being decoded.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows being decoded.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Encodes each joining request's prompt (a request whose prompt fails is told
    /// so and left out) and adds `n` rows for it.
    pub fn join(&mut self, core: &mut Core, jobs: Vec<Arc<Job>>) {
        let max_pos = core.model.config.max_position_embeddings;
        let mut encoded = Vec::with_capacity(jobs.len());
        for job in jobs {
            let len = job.req.prompt.len();
            let res = if len == 0 || len >= max_pos {
                Err(anyhow::anyhow!(
                    "prompt of {len} tokens does not fit the model's {max_pos} positions"
                ))
            } else {
                core.prompts.encode(&core.model, &job.req.prompt)
            };
            match res {
                Ok((cache, logits)) => encoded.push(Encoded {
                    job,
                    cache,
                    logits,
                    len,
                }),
                Err(e) => job.fail(&e),
            }
        }
        if encoded.is_empty() {
            return;
        }
        if let Err(e) = self.add(core, encoded) {
            // The batch's cache may be half rebuilt: every row ends.
            self.fail_all(&e);
        }
    }

    fn add(&mut self, core: &Core, encoded: Vec<Encoded>) -> Result<()> {
        let model = &core.model;
        // Keys encoded to end at `from`, turned to end at `to`.
        let turn = |cache: KvCache, from: usize, to: usize| -> Result<KvCache> {
            match to - from {
                0 => Ok(cache),
                d => Ok(cache.turned(&model.rope_turn(d as isize)?)?),
            }
        };
        let longest = encoded.iter().map(|e| e.len).max().unwrap_or(0);
        let end = self.pos.max(longest);
        let old_width = if self.rows.is_empty() {
            0
        } else {
            self.cache.len()
        };
        let width = old_width.max(longest);
        let mut caches = Vec::with_capacity(encoded.len() + 1);
        let mut logits = Vec::with_capacity(encoded.len() + 1);
        if !self.rows.is_empty() {
            caches.push(turn(std::mem::take(&mut self.cache), self.pos, end)?);
            logits.push(
                self.last
                    .take()
                    .context("the batch has no pending logits")?,
            );
            for p in &mut self.pads {
                *p += width - old_width;
            }
        }
        for e in encoded {
            let n = e.job.req.n.max(1);
            let cache = turn(e.cache, e.len, end)?;
            caches.push(if n > 1 { cache.repeat_batch(n)? } else { cache });
            logits.push(if n > 1 {
                Tensor::cat(&vec![&e.logits; n], 0)?
            } else {
                e.logits
            });
            self.pads.extend(std::iter::repeat_n(width - e.len, n));
            for c in 0..n {
                self.rows.push(Row::new(Arc::clone(&e.job), c));
            }
        }
        self.cache = KvCache::stack_left_padded(&caches, HEADROOM)?;
        self.last = Some(Tensor::cat(&logits, 0)?);
        self.pos = end;
        Ok(())
    }

    /// Every row picks its next token; finished rows (and those whose client went
    /// away) leave; the rest decode one position.
    pub fn step(&mut self, core: &Core) -> Result<()> {
        let model = &core.model;
        let max_pos = model.config.max_position_embeddings;
        let last = self
            .last
            .take()
            .context("the batch has no pending logits")?;
        let logits: Vec<Vec<f32>> = last.to_dtype(DType::F32)?.to_vec2()?;
        // Rows choose independently (under a schema that is most of a step's work).
        let mut next: Vec<u32> = self
            .rows
            .par_iter_mut()
            .zip(&logits)
            .map(|(row, l)| core.vocab.step(row, l, max_pos))
            .collect();
        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&k| self.rows[k].running())
            .collect();
        if keep.is_empty() {
            *self = Running::default();
            return Ok(());
        }
        if keep.len() < self.rows.len() {
            self.cache.retain_rows(&keep)?;
            self.rows = std::mem::take(&mut self.rows)
                .into_iter()
                .enumerate()
                .filter(|(k, _)| keep.binary_search(k).is_ok())
                .map(|(_, r)| r)
                .collect();
            self.pads = keep.iter().map(|&k| self.pads[k]).collect();
            next = keep.iter().map(|&k| next[k]).collect();
            // Columns no remaining row reads.
            let unread = self.pads.iter().copied().min().unwrap_or(0);
            if unread > 0 {
                self.cache = self.cache.skip_front(unread, HEADROOM)?;
                self.pads.iter_mut().for_each(|p| *p -= unread);
            }
        }
        let width = self.cache.len();
        if self.pos + 1 > max_pos {
            // Back to positions 0 .. width (every row is shorter than the table).
            let back = self.pos - width;
            self.cache = self.cache.turned(&model.rope_turn(-(back as isize))?)?;
            self.pos = width;
        }
        let dev = model.device();
        let rows = self.rows.len();
        let input = Tensor::from_vec(next, (rows, 1), dev)?;
        let mask = if self.pads.iter().any(|&p| p > 0) {
            let flat: Vec<f32> = self
                .pads
                .iter()
                .flat_map(|&p| left_pad_mask(p, width + 1))
                .collect();
            Some(Tensor::from_vec(flat, (rows, width + 1), dev)?)
        } else {
            None
        };
        let h =
            model.forward_hidden_masked(&input, self.pos, Some(&mut self.cache), mask.as_ref())?;
        self.pos += 1;
        self.last = Some(model.logits(&h)?.squeeze(1)?);
        Ok(())
    }

    /// Tells every row's client that decoding failed, and empties the batch.
    pub fn fail_all(&mut self, e: &anyhow::Error) {
        let msg = format!("{e:#}");
        let mut told: Vec<*const Job> = Vec::new();
        for r in &self.rows {
            let p = Arc::as_ptr(&r.job);
            if !told.contains(&p) {
                told.push(p);
                r.job.send(Event::Failed(msg.clone()));
            }
        }
        *self = Running::default();
    }
}
