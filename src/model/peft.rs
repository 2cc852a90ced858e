//! Export and import of LoRA adapters in PEFT's layout, loadable by PEFT and vLLM:
//! `adapter_config.json` and `adapter_model.safetensors` with keys
//! `base_model.model.<module>.lora_A.weight` (r × in) and `.lora_B.weight` (out × r).

use super::lora::LoraConfig;
use super::qwen3::Qwen3;
use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// PEFT's prefix for a causal-LM adapter.
pub const PREFIX: &str = "base_model.model.";

/// The `adapter_config.json` PEFT writes for a LoRA on a causal LM.
pub fn adapter_config(cfg: &LoraConfig, base_model: &str) -> serde_json::Value {
    serde_json::json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": cfg.r,
        "lora_alpha": cfg.alpha,
        "lora_dropout": cfg.dropout,
        "target_modules": cfg.target_modules,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "modules_to_save": null,
        "use_rslora": false,
        "use_dora": false,
        "layers_to_transform": null,
        "layers_pattern": null,
        "rank_pattern": {},
        "alpha_pattern": {},
        "revision": null
    })
}

/// Writes the model's adapters to `dir` in PEFT layout.
pub fn export(model: &Qwen3, cfg: &LoraConfig, base_model: &str, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tensors = HashMap::new();
    for lin in model.linears() {
        if let Some(l) = &lin.lora {
            tensors.insert(
                format!("{PREFIX}{}.lora_A.weight", lin.name),
                l.a.tensor().clone(),
            );
            tensors.insert(
                format!("{PREFIX}{}.lora_B.weight", lin.name),
                l.b.tensor().clone(),
            );
        }
    }
    anyhow::ensure!(
        !tensors.is_empty(),
        "the model has no LoRA adapters to export"
    );
    super::weights::save_file(&tensors, &dir.join("adapter_model.safetensors"))?;
    let text = serde_json::to_string_pretty(&adapter_config(cfg, base_model))?;
    crate::trajectory::jsonl::write_atomic(&dir.join("adapter_config.json"), text.as_bytes())
}

/// The `base_model_name_or_path` of an adapter config's text (`cpath` names the
/// file in errors).
pub fn base_model_of(text: &str, cpath: &Path) -> Result<String> {
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{}: invalid JSON", cpath.display()))?;
    v.get("base_model_name_or_path")
        .and_then(|b| b.as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: field `base_model_name_or_path` missing",
                cpath.display()
            )
        })
}

/// Reads a PEFT adapter folder: its config and tensors keyed by our parameter names
/// (`<module>.lora_A.weight`).
pub fn import(dir: &Path, device: &Device) -> Result<(LoraConfig, HashMap<String, Tensor>)> {
    let cpath = dir.join("adapter_config.json");
    let text =
        std::fs::read_to_string(&cpath).with_context(|| format!("reading {}", cpath.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: invalid JSON", cpath.display()))?;
    let field = |k: &str| {
        v.get(k)
            .ok_or_else(|| anyhow::anyhow!("{}: field `{k}` missing", cpath.display()))
    };
    let r = field("r")?
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("{}: field `r` must be an integer", cpath.display()))?;
    let alpha = field("lora_alpha")?.as_f64().ok_or_else(|| {
        anyhow::anyhow!("{}: field `lora_alpha` must be a number", cpath.display())
    })?;
    let dropout = v
        .get("lora_dropout")
        .and_then(|d| d.as_f64())
        .unwrap_or(0.0) as f32;
    let target_modules = match field("target_modules")? {
        serde_json::Value::Array(a) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        serde_json::Value::String(s) => vec![s.clone()],
        _ => anyhow::bail!("{}: field `target_modules` must be a list", cpath.display()),
    };
    let cfg = LoraConfig {
        r: r as usize,
        alpha,
        dropout,
        target_modules,
    };
    let raw = super::weights::load_file(&dir.join("adapter_model.safetensors"), device)?;
    let mut out = HashMap::new();
    for (k, t) in raw {
        let name = k.strip_prefix(PREFIX).unwrap_or(&k);
        // PEFT sometimes writes `lora_A.default.weight`.
        let name = name
            .replace(".lora_A.default.", ".lora_A.")
            .replace(".lora_B.default.", ".lora_B.");
        out.insert(name, t);
    }
    Ok((cfg, out))
}
