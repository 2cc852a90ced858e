//! Qwen3-VL: the vision tower's image tokens in place of the prompt's image
//! placeholders, its DeepStack features added after the first decoder layers, and
//! multimodal rotary positions (transformers' `Qwen3VLModel.forward`, images only).

use super::mrope::{MropePositions, VlTokenIds, rope_index};
use super::text::{Deepstack, VlText};
use super::vision::VisionModel;
use crate::model::KvCache;
use candle_core::{Result, Tensor};

/// Preprocessed images of one prompt: patch rows of every image concatenated, and each
/// image's patch grid, in prompt order.
#[derive(Debug, Clone, Copy)]
pub struct VlImages<'a> {
    /// `(Σ t·h·w, patch_dim)`.
    pub pixel_values: &'a Tensor,
    /// `[t, h, w]` patches per image.
    pub grid_thw: &'a [[usize; 3]],
}

/// Keys and values of the positions decoded so far, and where the rotary positions
/// continue (the prompt's `delta`, see [`MropePositions`]).
#[derive(Debug, Clone, Default)]
pub struct VlCache {
    kv: KvCache,
    delta: i64,
}

impl VlCache {
    /// An empty, differentiable cache ([`KvCache::new`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache for sampling ([`KvCache::for_decoding`]).
    pub fn for_decoding() -> Self {
        VlCache {
            kv: KvCache::for_decoding(),
            delta: 0,
        }
    }

    /// The cache with every batch row repeated `n` times in a row.
    pub fn repeat_batch(&self, n: usize) -> Result<VlCache> {
        Ok(VlCache {
            kv: self.kv.repeat_batch(n)?,
            delta: self.delta,
        })
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.kv.len()
    }

    /// The rotary position of the next token (`len + delta`).
    pub fn next_position(&self) -> i64 {
        self.kv.len() as i64 + self.delta
    }

    /// [`Self::next_position`] as a text token's position (an error if it does not
    /// fit).
    fn next_text_position(&self) -> Result<u32> {
        u32::try_from(self.next_position())
            .map_err(|_| candle_core::Error::Msg("rotary position overflows".into()))
    }

    /// The decoder's keys and values.
    pub fn kv(&self) -> &KvCache {
        &self.kv
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.kv.is_empty()
    }
}

/// The Qwen3-VL model: vision tower, text decoder and the image token ids.
pub struct Qwen3Vl {
    vision: VisionModel,
    text: VlText,
    ids: VlTokenIds,
    /// `vision_end_token_id` and `video_token_id` of the checkpoint, when it named them.
    extra_ids: (Option<u32>, Option<u32>),
}

impl Qwen3Vl {
    /// Joins a tower and a decoder; the tower's tokens must be the decoder's width.
    pub fn new(vision: VisionModel, text: VlText, ids: VlTokenIds) -> Result<Self> {
        let (out, hidden) = (
            vision.config().out_hidden_size,
            text.decoder().config.hidden_size,
        );
        if out != hidden {
            candle_core::bail!(
                "vision_config.out_hidden_size {out} differs from the text hidden_size {hidden}"
            );
        }
        Ok(Qwen3Vl {
            vision,
            text,
            ids,
            extra_ids: (None, None),
        })
    }

    /// The same model with the checkpoint's `vision_end_token_id` and `video_token_id`
    /// (written back by [`Self::save_dir`]).
    pub fn with_extra_ids(mut self, vision_end: Option<u32>, video: Option<u32>) -> Self {
        self.extra_ids = (vision_end, video);
        self
    }

    /// `vision_end_token_id` and `video_token_id`.
    pub fn extra_ids(&self) -> (Option<u32>, Option<u32>) {
        self.extra_ids
    }

    /// The vision tower.
    pub fn vision(&self) -> &VisionModel {
        &self.vision
    }

    /// The text decoder.
    pub fn text(&self) -> &VlText {
        &self.text
    }

    /// The text decoder, mutably (adapters).
    pub fn text_mut(&mut self) -> &mut VlText {
        &mut self.text
    }

    /// The image token ids.
    pub fn token_ids(&self) -> VlTokenIds {
        self.ids
    }

    /// Logits `(1, tokens.len(), vocab)` of one sequence; see [`Self::forward_hidden`].
    pub fn forward(
        &self,
        tokens: &[u32],
        images: Option<VlImages<'_>>,
        cache: Option<&mut VlCache>,
    ) -> Result<Tensor> {
        let h = self.forward_hidden(tokens, images, cache)?;
        self.text.logits(&h)
    }

    /// Final hidden states `(batch, l, hidden)` of text tokens `ids` `(batch, l)` that
    /// continue what every row of `cache` holds (a prompt [`Self::forward_hidden`]
    /// encoded, then repeated per row): at rotary positions `position + delta`, as a
    /// single sequence's continuation is.
    pub fn continue_hidden(&self, ids: &Tensor, cache: &mut VlCache) -> Result<Tensor> {
        let (_, l) = ids.dims2()?;
        if cache.is_empty() {
            candle_core::bail!("a continuation needs the prompt in the cache");
        }
        let positions = MropePositions::text(cache.next_text_position()?, l)?;
        let embeds = self.text.embed(ids)?;
        self.text
            .forward_hidden(&embeds, &positions, Some(&mut cache.kv), None)
    }

    /// Final hidden states `(1, tokens.len(), hidden)` of one sequence whose image
    /// placeholder runs (after `vision_start`, one token per merged image token) hold
    /// `images`. With a cache the tokens continue what it holds: images come with the
    /// first call (the prompt) only, later tokens are text at `position + delta`.
    pub fn forward_hidden(
        &self,
        tokens: &[u32],
        images: Option<VlImages<'_>>,
        cache: Option<&mut VlCache>,
    ) -> Result<Tensor> {
        let dev = self.text.decoder().device().clone();
        let grids = images.map_or(&[][..], |i| i.grid_thw);
        let positions = match cache.as_ref() {
            Some(c) if !c.is_empty() => {
                if images.is_some() || tokens.contains(&self.ids.image_token_id) {
                    candle_core::bail!(
                        "images go with the first call of a cache (the prompt), not a continuation"
                    );
                }
                MropePositions::text(c.next_text_position()?, tokens.len())?
            }
            _ => rope_index(
                tokens,
                grids,
                &self.ids,
                self.vision.config().spatial_merge_size,
            )?,
        };
        let ids = Tensor::from_slice(tokens, (1, tokens.len()), &dev)?;
        let mut embeds = self.text.embed(&ids)?;
        let deepstack = match images {
            None => None,
            Some(img) => Some(self.merge_images(tokens, img, &mut embeds)?),
        };
        let out = match cache {
            Some(c) => {
                if c.is_empty() {
                    c.delta = positions.delta;
                }
                self.text.forward_hidden(
                    &embeds,
                    &positions,
                    Some(&mut c.kv),
                    deepstack.as_ref(),
                )?
            }
            None => self
                .text
                .forward_hidden(&embeds, &positions, None, deepstack.as_ref())?,
        };
        Ok(out)
    }

    /// Runs the vision tower on `img` and puts its image tokens in place of the
    /// placeholders of `embeds` `(1, tokens.len(), hidden)`; returns the deepstack
    /// features and the rows they join. Row i of the merged embeddings is the token's
    /// own (i) or image row k (len + k), so gradients reach both the table and the
    /// tower.
    fn merge_images(
        &self,
        tokens: &[u32],
        img: VlImages<'_>,
        embeds: &mut Tensor,
    ) -> Result<Deepstack> {
        let dev = self.text.decoder().device().clone();
        let (tok, features) = self.vision.forward(img.pixel_values, img.grid_thw)?;
        let dtype = embeds.dtype();
        let image_rows: Vec<u32> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| **t == self.ids.image_token_id)
            .map(|(i, _)| i as u32)
            .collect();
        if image_rows.len() != tok.dim(0)? {
            candle_core::bail!(
                "{} image placeholders, the vision tower made {} image tokens",
                image_rows.len(),
                tok.dim(0)?
            );
        }
        // Row i of the merged embeddings: the token's own (i) or image row
        // k (len + k), so gradients reach both the table and the tower.
        let l = tokens.len();
        let mut pick: Vec<u32> = (0..l as u32).collect();
        for (k, &p) in image_rows.iter().enumerate() {
            pick[p as usize] = (l + k) as u32;
        }
        let hidden = embeds.dim(2)?;
        let pick = Tensor::from_vec(pick, l, &dev)?;
        *embeds = Tensor::cat(
            &[
                &embeds.reshape((l, hidden))?,
                &tok.to_device(&dev)?.to_dtype(dtype)?,
            ],
            0,
        )?
        .index_select(&pick, 0)?
        .reshape((1, l, hidden))?;
        let features = features
            .into_iter()
            .map(|f| f.to_device(&dev))
            .collect::<Result<Vec<_>>>()?;
        Ok(Deepstack {
            positions: image_rows,
            features,
        })
    }
}
