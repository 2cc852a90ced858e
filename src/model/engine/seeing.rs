//! Requests with an image (a Qwen3-VL checkpoint): for each sequence the whole VL model
//! encodes prompt and image into a fresh cache, then decodes one token a pass.

use super::row::Row;
use super::{Core, Job};
use crate::model::vl::VlCache;
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use std::sync::Arc;

/// Decodes every sequence of `job`, one after another.
pub(super) fn run(core: &Core, job: &Arc<Job>) -> Result<()> {
    let vl = core
        .vl
        .as_deref()
        .context("a request with an image reached a text model")?;
    let shot = job.req.image.as_deref().context("no image")?;
    let prompt = &job.req.prompt;
    let max_pos = core.model.config.max_position_embeddings;
    anyhow::ensure!(
        !prompt.is_empty() && prompt.len() < max_pos,
        "prompt length {} out of range",
        prompt.len()
    );
    let last_logits = |h: &Tensor| -> Result<Vec<f32>> {
        let k = h.dim(1)?;
        let l = vl.model.text().logits(&h.narrow(1, k - 1, 1)?)?;
        Ok(l.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
    };
    for c in 0..job.req.n {
        if job.gone() {
            break;
        }
        let mut row = Row::new(Arc::clone(job), c);
        let mut cache = VlCache::for_decoding();
        let h = vl
            .model
            .forward_hidden(prompt, Some(shot.images()), Some(&mut cache))?;
        let mut logits = last_logits(&h)?;
        loop {
            let t = core.vocab.step(&mut row, &logits, max_pos);
            if !row.running() {
                break;
            }
            let h = vl.model.forward_hidden(&[t], None, Some(&mut cache))?;
            logits = last_logits(&h)?;
        }
    }
    Ok(())
}
