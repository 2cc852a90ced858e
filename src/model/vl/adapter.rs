//! LoRA on the Qwen3-VL decoder's linear layers (the tower stays as it is, as in the
//! paper's recipe), exported and read in PEFT layout under the checkpoint's module
//! names (`base_model.model.model.language_model.layers.…`).

use super::model::Qwen3Vl;
use super::text::{checkpoint_name, decoder_name};
use crate::model::{LoraConfig, peft};
use anyhow::Result;
use candle_core::Device;
use std::path::Path;

/// The decoder's own name of a checkpoint module (`None` outside the decoder).
fn decoder_module(name: &str) -> Option<String> {
    if name == "lm_head" {
        return Some(name.to_string());
    }
    decoder_name(name)
}

impl Qwen3Vl {
    /// Adds LoRA adapters to the decoder's linear layers `cfg` targets; returns how many.
    pub fn add_lora(&mut self, cfg: &LoraConfig, seed: u64) -> Result<usize> {
        Ok(self.text_mut().decoder_mut().add_lora(cfg, seed)?)
    }

    /// Folds the adapters into the decoder's weights.
    pub fn merge_lora(&mut self) -> Result<()> {
        Ok(self.text_mut().decoder_mut().merge_lora()?)
    }

    /// Writes the adapters to `dir` in PEFT layout, `base_model` naming the base folder.
    pub fn export_adapter(&self, cfg: &LoraConfig, base_model: &str, dir: &Path) -> Result<()> {
        peft::export_as(self.text().decoder(), cfg, base_model, dir, checkpoint_name)
    }

    /// Attaches the PEFT adapter in `dir` (written by [`Self::export_adapter`] or PEFT
    /// on a Qwen3-VL model) to the decoder; returns its config.
    pub fn attach_adapter(&mut self, dir: &Path, device: &Device) -> Result<LoraConfig> {
        peft::attach_as(self.text_mut().decoder_mut(), dir, device, decoder_module)
    }
}
