//! RL checkpoints: the RL adapter (`trainable.safetensors` and a PEFT `adapter/`
//! naming the SFT checkpoint as its base), the optimizer state, the trainer state
//! (step, prompt-stream position, alerts) and, for a full-model SFT init, the merged
//! RL policy as a loadable model folder.
use super::config::RlConfig;
use super::policy::Policy;
use crate::model::{Qwen3, weights};
use crate::train::optim::AdamW;
use crate::train::run::{Alert, RunDir, write_checkpoint};
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
pub fn load_adapters(model: &Qwen3, values: &HashMap<String, Tensor>) -> Result<()> {
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
fn merged_weights(model: &Qwen3, scale: f64) -> Result<HashMap<String, Tensor>> {
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
    let model = &policy.model;
    write_checkpoint(run, st.step, |dir| {
        let trainable: HashMap<String, Tensor> = model
            .trainable_vars()
            .into_iter()
            .map(|(n, v)| (n, v.as_tensor().clone()))
            .collect();
        weights::save_file(&trainable, &dir.join("trainable.safetensors"))?;
        weights::save_file(&opt.state_tensors(), &dir.join("optimizer.safetensors"))?;
        let init = std::fs::canonicalize(&policy.init_checkpoint)
            .unwrap_or_else(|_| policy.init_checkpoint.clone());
        // The RL adapter alone, on top of the SFT checkpoint it was trained from.
        crate::model::peft::export(
            model,
            &cfg.lora,
            &init.to_string_lossy(),
            &dir.join("adapter"),
        )?;
        if policy.full_model_init {
            // A loadable model folder holding the RL policy (tiny models).
            model.config.save(dir)?;
            weights::save_file(
                &merged_weights(model, cfg.lora.scale())?,
                &dir.join("model.safetensors"),
            )?;
            let tok = policy.init_checkpoint.join("tokenizer.json");
            if tok.exists() {
                std::fs::copy(&tok, dir.join("tokenizer.json"))?;
            }
            let tc = policy.init_checkpoint.join("tokenizer_config.json");
            if tc.exists() {
                std::fs::copy(&tc, dir.join("tokenizer_config.json"))?;
            }
        }
        crate::trajectory::jsonl::write_atomic(
            &dir.join("trainer_state.json"),
            serde_json::to_string_pretty(st)?.as_bytes(),
        )
    })
}
