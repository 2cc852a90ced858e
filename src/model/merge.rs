//! A LoRA checkpoint (PEFT adapter + the base folder it names) written as one
//! transformers folder with the adapter folded into the weights: what engines that
//! take plain model folders load (verl's SFT-merged model, vLLM without LoRA,
//! transformers itself).

use super::lora::LoraConfig;
use super::vl::{Qwen3Vl, VlImageConfig, is_vl_folder};
use super::{Decoder, DecoderConfig, peft, tokenizer, weights};
use crate::util::new_folder::NewFolder;
use crate::util::sanitize::clean_line;
use anyhow::{Context, Result};
use candle_core::{DType, Device};
use std::path::{Path, PathBuf};

/// What [`merged_export`] read and wrote.
#[derive(Debug)]
pub struct MergeSummary {
    /// The base model folder the adapter names.
    pub base: PathBuf,
    /// The adapter's configuration.
    pub lora: LoraConfig,
    /// Whether the model sees screenshots (Qwen3-VL).
    pub vision: bool,
}

/// Files copied from the base folder as they are, where it has them.
const COPIED: [&str; 2] = ["generation_config.json", "preprocessor_config.json"];

/// Folds the PEFT adapter of `checkpoint` (a folder with `adapter/` or an adapter
/// folder itself) into the base model it names and writes the result to `out` (which
/// must not exist or be empty; it appears whole or not at all): `config.json`,
/// `model.safetensors` in f32, the base's tokenizer files, chat template and
/// generation config, and the checkpoint's screenshot setting for a Qwen3-VL model.
pub fn merged_export(checkpoint: &Path, out: &Path) -> Result<MergeSummary> {
    let label = clean_line(&checkpoint.display().to_string()).into_owned();
    let adapter = if checkpoint.join("adapter/adapter_config.json").is_file() {
        checkpoint.join("adapter")
    } else {
        checkpoint.to_path_buf()
    };
    let cpath = adapter.join("adapter_config.json");
    anyhow::ensure!(
        cpath.is_file(),
        "{label}: no PEFT adapter (adapter/adapter_config.json); {}",
        if weights::has_weights(checkpoint) {
            "this is a whole model folder already, nothing to merge"
        } else {
            "not a LoRA checkpoint"
        }
    );
    let text = crate::util::fs::read_text_limited(&cpath, 1 << 20)
        .with_context(|| format!("reading {}", cpath.display()))?;
    let base = PathBuf::from(peft::base_model_of(&text, &cpath)?);
    let folder = NewFolder::create(out, "merge")?;
    let dev = Device::Cpu;
    let vision = is_vl_folder(&base);
    let lora = if vision {
        let mut model = Qwen3Vl::load_dir(&base, DType::F32, &dev)?;
        let lora = model.attach_adapter(&adapter, &dev)?;
        model.merge_lora()?;
        model.save_dir(folder.path())?;
        // The screenshots the adapter was trained on, else the base's.
        if let Some(images) = VlImageConfig::of_model_dir(checkpoint)? {
            images.save(folder.path())?;
        }
        lora
    } else {
        let config = DecoderConfig::from_file(base.join("config.json"))?;
        let w = weights::load_dir(&base, &dev)?;
        let mut model = Decoder::from_weights(&config, w, DType::F32, &dev, false)
            .with_context(|| format!("loading the base model {}", base.display()))?;
        let lora = peft::attach(&mut model, &adapter, &dev)?;
        model.merge_lora()?;
        config.save(folder.path())?;
        weights::save_file(
            &model.base_weights(),
            &folder.path().join("model.safetensors"),
        )?;
        lora
    };
    tokenizer::copy_files(&base, folder.path())?;
    for name in COPIED {
        let (from, to) = (base.join(name), folder.path().join(name));
        if from.is_file() && !to.exists() {
            std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
        }
    }
    folder.finish()?;
    Ok(MergeSummary { base, lora, vision })
}
