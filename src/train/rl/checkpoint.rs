//! RL checkpoints: the RL adapter (`trainable.safetensors` and a PEFT `adapter/`
//! naming the SFT checkpoint as its base), the optimizer state, the trainer state
//! (step, prompt-stream position, alerts) and, for a full-model SFT init, the merged
//! RL policy as a loadable model folder.
use super::config::RlConfig;
use super::policy::{Policy, SftAdapter};
use crate::model::{Decoder, weights};
use crate::train::optim::AdamW;
use crate::train::run::{Alert, RunDir, save_trainable_and_optimizer, write_checkpoint};
use anyhow::Result;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainerState {
    pub step: u64,
    pub optimizer_t: u64,
    /// Prompts drawn from the stream so far.
    pub cursor: u64,
    #[serde(default)]
    pub alerts: Vec<Alert>,
}

/// Sets the RL adapter's variables from a checkpoint (Vars are shared handles, so
/// the model sees the new values).
pub fn load_adapters(model: &Decoder, values: &HashMap<String, Tensor>) -> Result<()> {
    let vars: HashMap<String, candle_core::Var> = model.trainable_vars().into_iter().collect();
    for (name, t) in values {
        let v = vars
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("checkpoint has unknown adapter `{name}`"))?;
        anyhow::ensure!(
            v.dims() == t.dims(),
            "adapter `{name}`: checkpoint shape {:?}, model shape {:?}",
            t.dims(),
            v.dims()
        );
        v.set(&t.to_dtype(v.dtype())?.to_device(v.device())?)?;
    }
    Ok(())
}

/// The base weights with every adapter folded in (`W + scale·B·A`), by HF name.
fn merged_weights(model: &Decoder, scale: f64) -> Result<HashMap<String, Tensor>> {
    let params: HashMap<String, Tensor> = model
        .named_params()
        .into_iter()
        .map(|(n, p)| (n, p.tensor().clone()))
        .collect();
    let mut out = HashMap::new();
    for (name, t) in &params {
        if name.contains(".lora_") {
            continue;
        }
        let stem = name.trim_end_matches(".weight");
        let merged = match (
            params.get(&format!("{stem}.lora_A.weight")),
            params.get(&format!("{stem}.lora_B.weight")),
        ) {
            (Some(a), Some(b)) => {
                let delta = (b.matmul(a)? * scale)?.to_dtype(t.dtype())?;
                (t + delta)?
            }
            _ => t.clone(),
        };
        out.insert(name.clone(), merged);
    }
    Ok(out)
}

pub fn save_checkpoint(
    cfg: &RlConfig,
    run: &RunDir,
    policy: &Policy,
    opt: &AdamW,
    st: &TrainerState,
) -> Result<PathBuf> {
    let model = policy.model();
    write_checkpoint(run, st.step, |dir| {
        save_trainable_and_optimizer(dir, &model.trainable_vars(), opt)?;
        let init = std::fs::canonicalize(&policy.init_checkpoint)
            .unwrap_or_else(|_| policy.init_checkpoint.clone());
        // Adapter tensors under the base checkpoint's names (a Qwen3-VL decoder's
        // are `model.language_model.…`).
        let rename = |n: &str| match policy.vl() {
            Some(_) => crate::model::vl::text::checkpoint_name(n),
            None => n.to_string(),
        };
        match &policy.sft_adapter {
            // One adapter holding SFT and RL on the original base: the checkpoint
            // loads like an SFT checkpoint (`LocalModelPolicy::from_checkpoint`).
            Some(sft) => {
                let (lcfg, tensors) = combined_adapter(model, cfg.lora.scale(), sft)?;
                let tensors = tensors.into_iter().map(|(n, t)| (rename(&n), t)).collect();
                write_adapter(&lcfg, &tensors, &sft.base_model, &dir.join("adapter"))?;
            }
            // The RL adapter alone, on top of the SFT checkpoint it was trained from.
            None => crate::model::peft::export_as(
                model,
                &cfg.lora,
                &init.to_string_lossy(),
                &dir.join("adapter"),
                rename,
            )?,
        }
        // The prompt layout of the checkpoint it was trained from, whose corpus
        // layout its prompts were rendered in.
        crate::train::prompt_record::copy(&policy.init_checkpoint, dir)?;
        if let Some(image) = &policy.image {
            // The screenshots' preprocessing travels with the checkpoint.
            image.save(dir)?;
        }
        if policy.full_model_init {
            // A loadable model folder holding the RL policy (tiny models).
            let merged = merged_weights(model, cfg.lora.scale())?;
            match policy.vl() {
                None => {
                    model.config.save(dir)?;
                    weights::save_file(&merged, &dir.join("model.safetensors"))?;
                }
                Some(vl) => {
                    vl.config().save(dir)?;
                    let mut all = vl.vision().named_weights()?;
                    all.extend(merged.into_iter().map(|(n, t)| (rename(&n), t)));
                    weights::save_file(&all, &dir.join("model.safetensors"))?;
                }
            }
            crate::model::tokenizer::copy_files(&policy.init_checkpoint, dir)?;
        }
        crate::util::fs::write_atomic(
            &dir.join("trainer_state.json"),
            serde_json::to_string_pretty(st)?.as_bytes(),
        )
    })
}
/// The model's training variables (the RL adapter) as f32 tensors on the CPU.
fn trainable_f32(model: &Decoder) -> Result<HashMap<String, Tensor>> {
    use candle_core::{DType, Device};
    model
        .trainable_vars()
        .into_iter()
        .map(|(n, v)| {
            Ok((
                n,
                v.as_tensor()
                    .to_dtype(DType::F32)?
                    .to_device(&Device::Cpu)?,
            ))
        })
        .collect()
}

/// One LoRA adapter equal to the SFT adapter plus the RL adapter:
/// `s₁·B₁A₁ + s₂·B₂A₂ = B·A` with `A = [A₁; A₂]`, `B = [s₁B₁, s₂B₂]`, rank r₁ + r₂ and
/// scale 1 (α = r). A module with only one of the two gets zero blocks for the other.
pub fn combined_adapter(
    model: &Decoder,
    rl_scale: f64,
    sft: &SftAdapter,
) -> Result<(crate::model::LoraConfig, HashMap<String, Tensor>)> {
    use candle_core::{DType, Device};
    let rl = trainable_f32(model)?;
    let (r1, r2) = (sft.cfg.r, rl_rank(&rl));
    let s1 = sft.cfg.scale();
    let mut modules: Vec<String> = sft
        .tensors
        .keys()
        .chain(rl.keys())
        .filter_map(|k| k.strip_suffix(".lora_A.weight").map(str::to_string))
        .collect();
    modules.sort();
    modules.dedup();
    let mut out = HashMap::new();
    let mut targets = Vec::new();
    for m in &modules {
        let a_name = format!("{m}.lora_A.weight");
        let b_name = format!("{m}.lora_B.weight");
        let f32 = |t: &Tensor| t.to_dtype(DType::F32);
        let (a1, b1) = (sft.tensors.get(&a_name), sft.tensors.get(&b_name));
        let (a2, b2) = (rl.get(&a_name), rl.get(&b_name));
        let (in_dim, out_dim) = match (a1.or(a2), b1.or(b2)) {
            (Some(a), Some(b)) => (a.dim(1)?, b.dim(0)?),
            _ => anyhow::bail!("adapter of `{m}` lacks lora_A or lora_B"),
        };
        let zeros = |shape: (usize, usize)| Tensor::zeros(shape, DType::F32, &Device::Cpu);
        let a = Tensor::cat(
            &[
                match a1 {
                    Some(t) => f32(t)?,
                    None => zeros((r1, in_dim))?,
                },
                match a2 {
                    Some(t) => t.clone(),
                    None => zeros((r2, in_dim))?,
                },
            ],
            0,
        )?;
        let b = Tensor::cat(
            &[
                match b1 {
                    Some(t) => (f32(t)? * s1)?,
                    None => zeros((out_dim, r1))?,
                },
                match b2 {
                    Some(t) => (t * rl_scale)?,
                    None => zeros((out_dim, r2))?,
                },
            ],
            1,
        )?;
        out.insert(a_name, a);
        out.insert(b_name, b);
        let last = m.rsplit('.').next().unwrap_or(m).to_string();
        if !targets.contains(&last) {
            targets.push(last);
        }
    }
    let r = r1 + r2;
    Ok((
        crate::model::LoraConfig {
            r,
            alpha: r as f64,
            dropout: 0.0,
            target_modules: targets,
        },
        out,
    ))
}

/// The rank of the RL adapter (rows of any lora_A).
fn rl_rank(rl: &HashMap<String, Tensor>) -> usize {
    rl.iter()
        .find(|(k, _)| k.ends_with(".lora_A.weight"))
        .and_then(|(_, t)| t.dim(0).ok())
        .unwrap_or(0)
}

/// Writes adapter tensors (our names) in PEFT layout.
fn write_adapter(
    cfg: &crate::model::LoraConfig,
    tensors: &HashMap<String, Tensor>,
    base_model: &str,
    dir: &std::path::Path,
) -> Result<()> {
    use crate::model::peft::{PREFIX, adapter_config};
    std::fs::create_dir_all(dir)?;
    let named: HashMap<String, Tensor> = tensors
        .iter()
        .map(|(k, t)| (format!("{PREFIX}{k}"), t.clone()))
        .collect();
    weights::save_file(&named, &dir.join("adapter_model.safetensors"))?;
    crate::util::fs::write_atomic(
        &dir.join("adapter_config.json"),
        serde_json::to_string_pretty(&adapter_config(cfg, base_model))?.as_bytes(),
    )
}
