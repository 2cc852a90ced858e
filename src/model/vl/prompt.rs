//! Screenshots in a chat prompt: the placeholder text that stands for an image in a
//! user message, its expansion to one token per merged image token after tokenizing
//! (what transformers' Qwen3-VL processor does to the text), and the token ids.

use super::mrope::VlTokenIds;
use super::preprocess::{VlImageConfig, num_image_tokens, smart_resize};
use crate::model::chat_template::{Encoded, Message};
use anyhow::{Context, Result};
use std::path::Path;
use tokenizers::Tokenizer;

/// Opens an image in a prompt.
pub const VISION_START: &str = "<|vision_start|>";
/// Closes it.
pub const VISION_END: &str = "<|vision_end|>";
/// Stands for one merged image token (one in the text, expanded after tokenizing).
pub const IMAGE_PAD: &str = "<|image_pad|>";
/// An image in a message's text, before tokenizing.
pub const IMAGE_PLACEHOLDER: &str = "<|vision_start|><|image_pad|><|vision_end|>";

/// The image token ids of a tokenizer that has the three image tokens.
pub fn token_ids(tok: &Tokenizer) -> Result<VlTokenIds> {
    let id = |t: &str| {
        tok.token_to_id(t)
            .with_context(|| format!("the tokenizer has no `{t}` token"))
    };
    Ok(VlTokenIds {
        image_token_id: id(IMAGE_PAD)?,
        vision_start_token_id: id(VISION_START)?,
    })
}

/// `messages` with one image placeholder after the text of the last user message (the
/// screenshot of the observation that message describes). Unchanged without a user
/// message.
pub fn with_screenshot(messages: &[Message]) -> Vec<Message> {
    let mut out = messages.to_vec();
    if let Some(m) = out.iter_mut().rev().find(|m| m.role == "user") {
        m.content = format!("{}\n{IMAGE_PLACEHOLDER}", m.content);
    }
    out
}

/// `e` with its `n`-th image placeholder token repeated `counts[n]` times (never a
/// loss target). Errors when the placeholders and `counts` differ in number.
pub fn expand_images(e: &Encoded, image_token: u32, counts: &[usize]) -> Result<Encoded> {
    let mut out = Encoded {
        ids: Vec::with_capacity(e.ids.len() + counts.iter().sum::<usize>()),
        mask: Vec::with_capacity(e.ids.len() + counts.iter().sum::<usize>()),
    };
    let mut k = 0;
    for (&id, &m) in e.ids.iter().zip(&e.mask) {
        if id != image_token {
            out.ids.push(id);
            out.mask.push(m);
            continue;
        }
        let n = *counts.get(k).with_context(|| {
            format!(
                "the prompt has more image placeholders than the {} images",
                counts.len()
            )
        })?;
        k += 1;
        out.ids.extend(std::iter::repeat_n(id, n));
        out.mask.extend(std::iter::repeat_n(false, n));
    }
    anyhow::ensure!(
        k == counts.len(),
        "the prompt has {k} image placeholders for {} images",
        counts.len()
    );
    Ok(out)
}

/// Prompt ids with each image placeholder repeated as [`expand_images`] does.
pub fn expand_ids(ids: &[u32], image_token: u32, counts: &[usize]) -> Result<Vec<u32>> {
    let e = Encoded {
        ids: ids.to_vec(),
        mask: vec![false; ids.len()],
    };
    Ok(expand_images(&e, image_token, counts)?.ids)
}

/// A screenshot ready for the model: its pixel rows on the device, its patch grid and
/// how many placeholder tokens stand for it.
#[derive(Debug)]
pub struct Screenshot {
    pixel_values: candle_core::Tensor,
    grid_thw: [[usize; 3]; 1],
    /// Merged image tokens (placeholders in the prompt).
    pub tokens: usize,
}

impl Screenshot {
    /// Reads and preprocesses the image at `path` (errors name the file).
    pub fn load(path: &Path, cfg: &VlImageConfig, device: &candle_core::Device) -> Result<Self> {
        let img = image::open(path).with_context(|| format!("reading {}", path.display()))?;
        Self::of_image(&img, cfg, device).with_context(|| format!("{}", path.display()))
    }

    /// Preprocesses a decoded image (e.g. one sent to `rmsweb serve`).
    pub fn of_image(
        img: &image::DynamicImage,
        cfg: &VlImageConfig,
        device: &candle_core::Device,
    ) -> Result<Self> {
        let pixels = super::preprocess(img, cfg)?;
        Ok(Screenshot {
            pixel_values: pixels.to_tensor(device)?,
            grid_thw: [pixels.grid_thw],
            tokens: pixels.num_image_tokens()?,
        })
    }

    /// The model's image input.
    pub fn images(&self) -> super::VlImages<'_> {
        super::VlImages {
            pixel_values: &self.pixel_values,
            grid_thw: &self.grid_thw,
        }
    }
}

/// How many image tokens the screenshot at `path` becomes under `cfg`, from its size
/// alone (the header is read, not the pixels).
pub fn image_tokens_of(path: &Path, cfg: &VlImageConfig) -> Result<usize> {
    let (w, h) = image::image_dimensions(path)
        .with_context(|| format!("reading the size of {}", path.display()))?;
    let (rh, rw) = smart_resize(
        h as usize,
        w as usize,
        cfg.factor(),
        cfg.min_pixels,
        cfg.max_pixels,
    )
    .with_context(|| format!("{}", path.display()))?;
    num_image_tokens(
        [1, rh / cfg.patch_size, rw / cfg.patch_size],
        cfg.merge_size,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_to_each_images_count_and_never_train() {
        let e = Encoded {
            ids: vec![1, 9, 2, 9, 3],
            mask: vec![false, false, false, false, true],
        };
        let x = expand_images(&e, 9, &[3, 1]).unwrap();
        assert_eq!(x.ids, vec![1, 9, 9, 9, 2, 9, 3]);
        assert_eq!(x.mask, vec![false, false, false, false, false, false, true]);
        assert!(expand_images(&e, 9, &[3]).is_err());
        assert!(expand_images(&e, 9, &[3, 1, 1]).is_err());
    }

    #[test]
    fn the_screenshot_goes_after_the_last_user_message() {
        let m = [
            Message::new("system", "s"),
            Message::new("user", "first"),
            Message::new("assistant", "a"),
            Message::new("user", "second"),
        ];
        let out = with_screenshot(&m);
        assert_eq!(out[1].content, "first");
        assert_eq!(
            out[3].content,
            "second\n<|vision_start|><|image_pad|><|vision_end|>"
        );
    }
}
