//! Export and import of LoRA adapters in PEFT's layout, loadable by PEFT and vLLM:
//! `adapter_config.json` and `adapter_model.safetensors` with keys
//! `base_model.model.<module>.lora_A.weight` (r × in) and `.lora_B.weight` (out × r).

use super::decoder::Decoder;
use super::lora::LoraConfig;
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
pub fn export(model: &Decoder, cfg: &LoraConfig, base_model: &str, dir: &Path) -> Result<()> {
    export_as(model, cfg, base_model, dir, |m| m.to_string())
}

/// [`export`] with each module named as `checkpoint_name` says: the name the module
/// has in the base checkpoint (a Qwen3-VL decoder's `model.language_model.…`).
pub fn export_as(
    model: &Decoder,
    cfg: &LoraConfig,
    base_model: &str,
    dir: &Path,
    checkpoint_name: impl Fn(&str) -> String,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tensors = HashMap::new();
    for lin in model.linears() {
        if let Some(l) = &lin.lora {
            let name = checkpoint_name(&lin.name);
            tensors.insert(
                format!("{PREFIX}{name}.lora_A.weight"),
                l.a.tensor().clone(),
            );
            tensors.insert(
                format!("{PREFIX}{name}.lora_B.weight"),
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
    crate::util::fs::write_atomic(&dir.join("adapter_config.json"), text.as_bytes())
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

/// Adapter-config keys that change what the adapter computes, with the value this
/// crate computes (PEFT's default). Any other value is refused by name.
fn check_math_keys(v: &serde_json::Value, cpath: &Path) -> Result<()> {
    use serde_json::Value;
    let empty = |x: &Value| match x {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty() || s == "none",
        Value::Number(_) => false,
    };
    if let Some(t) = v.get("peft_type").filter(|t| !t.is_null()) {
        anyhow::ensure!(
            t == "LORA",
            "{}: field `peft_type`: {t} adapters are not supported (only LORA)",
            cpath.display()
        );
    }
    for key in [
        "use_dora",
        "lora_bias",
        "fan_in_fan_out",
        "rank_pattern",
        "alpha_pattern",
        "modules_to_save",
        "layer_replication",
        "trainable_token_indices",
        "target_parameters",
        "use_qalora",
        "alora_invocation_tokens",
        "bias",
        "megatron_config",
    ] {
        if let Some(x) = v.get(key) {
            anyhow::ensure!(
                empty(x),
                "{}: field `{key}`: {x} is not supported (it changes what the adapter computes)",
                cpath.display()
            );
        }
    }
    Ok(())
}

/// Reads a PEFT adapter folder: its config and tensors keyed by our parameter names
/// (`<module>.lora_A.weight`).
///
/// The adapted modules are those the tensors name (so `target_modules` given as a
/// regular expression or `all-linear`, `layers_to_transform` and `exclude_modules`
/// need no interpretation); `target_modules` lists their names. rsLoRA
/// (`use_rslora`, scale α/√r) is folded into `alpha`. Keys that change the adapter's
/// math otherwise (DoRA, bias, rank or alpha patterns, modules to save, ...) are
/// refused by name, as is any tensor that is not a `lora_A`/`lora_B` pair.
pub fn import(dir: &Path, device: &Device) -> Result<(LoraConfig, HashMap<String, Tensor>)> {
    let cpath = dir.join("adapter_config.json");
    let text =
        std::fs::read_to_string(&cpath).with_context(|| format!("reading {}", cpath.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: invalid JSON", cpath.display()))?;
    check_math_keys(&v, &cpath)?;
    let field = |k: &str| {
        v.get(k)
            .ok_or_else(|| anyhow::anyhow!("{}: field `{k}` missing", cpath.display()))
    };
    let r = field("r")?.as_u64().filter(|&r| r > 0).ok_or_else(|| {
        anyhow::anyhow!("{}: field `r` must be a positive integer", cpath.display())
    })?;
    let mut alpha = field("lora_alpha")?.as_f64().ok_or_else(|| {
        anyhow::anyhow!("{}: field `lora_alpha` must be a number", cpath.display())
    })?;
    match v.get("use_rslora") {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => {}
        // α/√r = (α·√r)/r.
        Some(serde_json::Value::Bool(true)) => alpha *= (r as f64).sqrt(),
        Some(x) => anyhow::bail!(
            "{}: field `use_rslora` must be true or false, got {x}",
            cpath.display()
        ),
    }
    let dropout = v
        .get("lora_dropout")
        .and_then(|d| d.as_f64())
        .unwrap_or(0.0) as f32;
    let tpath = dir.join("adapter_model.safetensors");
    let raw = super::weights::load_file(&tpath, device)?;
    let (out, modules) = lora_tensors(&tpath, raw)?;
    // The adapted module names, in the config's order where it lists them.
    let listed: Vec<String> = match v.get("target_modules") {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let mut target_modules: Vec<String> = modules
        .keys()
        .map(|m| m.rsplit('.').next().unwrap_or(m).to_string())
        .collect();
    target_modules.sort_by_key(|m| {
        let at = listed.iter().position(|l| l == m).unwrap_or(usize::MAX);
        (at, m.clone())
    });
    target_modules.dedup();
    let cfg = LoraConfig {
        r: r as usize,
        alpha,
        dropout,
        target_modules,
    };
    Ok((cfg, out))
}

/// The adapted modules by name, and which of their A and B matrices were found.
type Modules = std::collections::BTreeMap<String, [bool; 2]>;

/// The adapter's LoRA tensors under their module names (PEFT's `.default.` dropped),
/// and the adapted modules; any other tensor, or a module with one matrix of its
/// pair, is refused.
#[allow(clippy::type_complexity)]
fn lora_tensors(
    tpath: &Path,
    raw: HashMap<String, Tensor>,
) -> Result<(
    HashMap<String, Tensor>,
    std::collections::BTreeMap<String, [bool; 2]>,
)> {
    let mut out = HashMap::new();
    let mut modules = Modules::new();
    for (k, t) in raw {
        let name = k.strip_prefix(PREFIX).unwrap_or(&k);
        // PEFT sometimes writes `lora_A.default.weight`.
        let name = name
            .replace(".lora_A.default.", ".lora_A.")
            .replace(".lora_B.default.", ".lora_B.");
        let (module, which) = if let Some(m) = name.strip_suffix(".lora_A.weight") {
            (m, 0)
        } else if let Some(m) = name.strip_suffix(".lora_B.weight") {
            (m, 1)
        } else {
            anyhow::bail!(
                "{}: tensor `{}` is not a LoRA A or B matrix (not supported)",
                tpath.display(),
                crate::util::sanitize::clean_line(&k)
            );
        };
        modules.entry(module.to_string()).or_default()[which] = true;
        out.insert(name, t);
    }
    for (m, [a, b]) in &modules {
        anyhow::ensure!(
            *a && *b,
            "{}: module `{}` has a lora_{} matrix but no lora_{}",
            tpath.display(),
            crate::util::sanitize::clean_line(m),
            if *a { "A" } else { "B" },
            if *a { "B" } else { "A" }
        );
    }
    anyhow::ensure!(!modules.is_empty(), "{}: no LoRA tensors", tpath.display());
    Ok((out, modules))
}

/// Reads the PEFT adapter in `dir` and attaches it to `model` exactly where its tensors
/// say (every tensor used, every attached adapter loaded); returns its config.
pub fn attach(model: &mut Decoder, dir: &Path, device: &Device) -> Result<LoraConfig> {
    attach_as(model, dir, device, |m| Some(m.to_string()))
}

/// [`attach`] for an adapter whose module names are a checkpoint's: `model_name` maps
/// each to the model's own name (`None`: a module the model does not have).
pub fn attach_as(
    model: &mut Decoder,
    dir: &Path,
    device: &Device,
    model_name: impl Fn(&str) -> Option<String>,
) -> Result<LoraConfig> {
    let (cfg, raw) = import(dir, device)?;
    let mut tensors = HashMap::new();
    for (k, t) in raw {
        let (module, tail) = k
            .strip_suffix(".lora_A.weight")
            .map(|m| (m, ".lora_A.weight"))
            .or_else(|| {
                k.strip_suffix(".lora_B.weight")
                    .map(|m| (m, ".lora_B.weight"))
            })
            .unwrap_or((k.as_str(), ""));
        let Some(own) = model_name(module) else {
            anyhow::bail!(
                "{}: adapter tensors for a module the model does not have: {}",
                dir.display(),
                crate::util::sanitize::clean_line(module)
            );
        };
        tensors.insert(format!("{own}{tail}"), t);
    }
    let modules: std::collections::BTreeSet<String> = tensors
        .keys()
        .filter_map(|k| k.strip_suffix(".lora_A.weight"))
        .map(str::to_string)
        .collect();
    let n = model.add_lora_to(&cfg, 0, &modules)?;
    if n != modules.len() {
        let known: std::collections::BTreeSet<String> =
            model.linears().iter().map(|l| l.name.clone()).collect();
        let unknown: Vec<&String> = modules.difference(&known).collect();
        anyhow::bail!(
            "{}: adapter tensors for modules the model does not have: {}",
            dir.display(),
            crate::util::sanitize::clean_line(&format!("{unknown:?}"))
        );
    }
    model
        .load_params(&tensors)
        .with_context(|| format!("loading adapter {}", dir.display()))?;
    Ok(cfg)
}
