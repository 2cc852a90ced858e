//! Qwen3-VL folders against Hugging Face transformers, without torch: the folders under
//! tests/data/vl/hf/ were saved by transformers 5.9 (`scripts/vl/make_hf_fixture.py`)
//! with its logits for a prompt of text and two images of different grids.

use super::data_dir;
use crate::hf::max_abs_diff;
use candle_core::{DType, Device, Tensor};
use rmsweb::model::vl::{Qwen3Vl, VlConfig, VlImages};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Largest logit difference accepted (the parity bar of issue #21).
const TOLERANCE: f32 = 1e-4;

fn folder(name: &str) -> PathBuf {
    data_dir().join("hf").join(name)
}

struct Reference {
    ids: Vec<u32>,
    pixels: Tensor,
    grids: Vec<[usize; 3]>,
    logits: Tensor,
}

fn reference(dir: &Path) -> Reference {
    let r =
        candle_core::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    let ids = r["input_ids"]
        .to_dtype(DType::I64)
        .unwrap()
        .to_vec1::<i64>()
        .unwrap()
        .into_iter()
        .map(|x| x as u32)
        .collect();
    let grids = r["image_grid_thw"]
        .to_dtype(DType::I64)
        .unwrap()
        .to_vec2::<i64>()
        .unwrap()
        .into_iter()
        .map(|g| [g[0] as usize, g[1] as usize, g[2] as usize])
        .collect();
    Reference {
        ids,
        pixels: r["pixel_values"].clone(),
        grids,
        logits: r["logits"].clone(),
    }
}

fn logits(model: &Qwen3Vl, r: &Reference) -> Tensor {
    let images = VlImages {
        pixel_values: &r.pixels,
        grid_thw: &r.grids,
    };
    model
        .forward(&r.ids, Some(images), None)
        .unwrap()
        .squeeze(0)
        .unwrap()
}

/// Names and shapes of every tensor in a folder's safetensors.
fn layout(dir: &Path) -> BTreeMap<String, Vec<usize>> {
    rmsweb::model::weights::load_dir(dir, &Device::Cpu)
        .unwrap()
        .into_iter()
        .map(|(n, t)| (n, t.dims().to_vec()))
        .collect()
}

/// A folder transformers saved (one file, and shards with tied embeddings) loads and
/// gives transformers' logits at every position of an image + text prompt: patch
/// embedding, M-RoPE over two grids, DeepStack, the merger and the LM head.
#[test]
fn hf_qwen3_vl_folders_give_transformers_logits() {
    for name in ["tiny", "tiny-sharded"] {
        let dir = folder(name);
        let model = Qwen3Vl::load_dir(&dir, DType::F32, &Device::Cpu).unwrap();
        let r = reference(&dir);
        let ours = logits(&model, &r);
        assert_eq!(ours.dims(), r.logits.dims(), "{name}: logits shape");
        let d = max_abs_diff(&ours, &r.logits);
        eprintln!("{name}: max |rmsweb - transformers| = {d:.2e}");
        assert!(d < TOLERANCE, "{name}: logits differ by {d}");
    }
}

/// `save_dir` writes what transformers wrote: the same tensor names and shapes, a
/// config that reads back equal, and the folder loads again to the same logits.
#[test]
fn exported_vl_folder_has_the_transformers_layout() {
    for name in ["tiny", "tiny-sharded"] {
        let dir = folder(name);
        let model = Qwen3Vl::load_dir(&dir, DType::F32, &Device::Cpu).unwrap();
        let out = tempfile::tempdir().unwrap();
        model.save_dir(out.path()).unwrap();
        assert_eq!(
            layout(out.path()),
            layout(&dir),
            "{name}: tensor names and shapes"
        );
        let theirs = VlConfig::from_file(&dir.join("config.json")).unwrap();
        let ours = VlConfig::from_file(&out.path().join("config.json")).unwrap();
        assert_eq!(ours, theirs, "{name}: config");
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("config.json")).unwrap())
                .unwrap();
        assert_eq!(written["model_type"], "qwen3_vl");
        assert_eq!(written["text_config"]["model_type"], "qwen3_vl_text");
        assert_eq!(written["vision_config"]["model_type"], "qwen3_vl_vision");
        assert_eq!(written["vision_end_token_id"], 95);
        let again = Qwen3Vl::load_dir(out.path(), DType::F32, &Device::Cpu).unwrap();
        let r = reference(&dir);
        assert!(max_abs_diff(&logits(&again, &r), &r.logits) < TOLERANCE);
    }
}

/// A broken config names its file and the field; a missing weight names the weight.
#[test]
fn bad_vl_folders_name_file_and_field() {
    let out = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(folder("tiny").join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    v["vision_config"]["num_heads"] = 3.into();
    std::fs::write(out.path().join("config.json"), v.to_string()).unwrap();
    let err = format!(
        "{:#}",
        VlConfig::from_file(&out.path().join("config.json")).unwrap_err()
    );
    assert!(err.contains("config.json"), "{err}");
    assert!(
        err.contains("hidden_size") && err.contains("num_heads"),
        "{err}"
    );

    std::fs::write(out.path().join("config.json"), &src).unwrap();
    let mut w = rmsweb::model::weights::load_dir(folder("tiny"), &Device::Cpu).unwrap();
    w.remove("model.visual.merger.linear_fc2.bias");
    rmsweb::model::weights::save_file(&w, &out.path().join("model.safetensors")).unwrap();
    let err = format!(
        "{:#}",
        Qwen3Vl::load_dir(out.path(), DType::F32, &Device::Cpu)
            .err()
            .unwrap()
    );
    assert!(err.contains("merger.linear_fc2"), "{err}");
}

fn lora_config() -> rmsweb::model::LoraConfig {
    rmsweb::model::LoraConfig {
        r: 4,
        alpha: 8.0,
        dropout: 0.0,
        target_modules: rmsweb::model::LoraConfig::ALL_LINEAR
            .map(String::from)
            .to_vec(),
    }
}

/// The folder's model with LoRA on all 21 decoder linears, B random (not zero).
fn with_random_lora(dir: &Path) -> (Qwen3Vl, rmsweb::model::LoraConfig) {
    let mut model = Qwen3Vl::load_dir(dir, DType::F32, &Device::Cpu).unwrap();
    let cfg = lora_config();
    assert_eq!(model.add_lora(&cfg, 5).unwrap(), 3 * 7);
    for (i, (name, var)) in model
        .text()
        .decoder()
        .trainable_vars()
        .into_iter()
        .enumerate()
    {
        if name.contains("lora_B") {
            let shape = var.as_tensor().dims().to_vec();
            let noise = (super::seeded_normal(&shape, 100 + i as u64) * 0.3).unwrap();
            var.set(&noise).unwrap();
        }
    }
    (model, cfg)
}

/// LoRA on every decoder linear of a transformers-saved VL model, with nonzero B:
/// the unmerged adapters, the same adapters exported in PEFT layout and attached to a
/// fresh load, and the adapters merged into the weights give one set of logits on an
/// image + text prompt, away from the base model's.
#[test]
fn vl_lora_merged_exported_and_attached_agree() {
    let dir = folder("tiny");
    let dev = Device::Cpu;
    let r = reference(&dir);
    let (mut model, cfg) = with_random_lora(&dir);
    let unmerged = logits(&model, &r);
    let moved = max_abs_diff(&unmerged, &r.logits);
    assert!(moved > 0.1, "the adapters barely move the logits ({moved})");

    let out = tempfile::tempdir().unwrap();
    model
        .export_adapter(&cfg, &dir.to_string_lossy(), out.path())
        .unwrap();
    let names: Vec<String> =
        rmsweb::model::weights::load_file(&out.path().join("adapter_model.safetensors"), &dev)
            .unwrap()
            .into_keys()
            .collect();
    assert_eq!(names.len(), 2 * 21);
    assert!(names.contains(
        &"base_model.model.model.language_model.layers.2.mlp.down_proj.lora_B.weight".into()
    ));
    let mut fresh = Qwen3Vl::load_dir(&dir, DType::F32, &dev).unwrap();
    let read = fresh.attach_adapter(out.path(), &dev).unwrap();
    assert_eq!(read.r, 4);
    let attached = logits(&fresh, &r);

    model.merge_lora().unwrap();
    let merged = logits(&model, &r);
    let (d_attached, d_merged) = (
        max_abs_diff(&attached, &unmerged),
        max_abs_diff(&merged, &unmerged),
    );
    eprintln!("vl lora: moved {moved:.3}, attached {d_attached:.2e}, merged {d_merged:.2e}");
    assert!(d_attached < 1e-5 && d_merged < 1e-4);
}

/// What rmsweb writes loads in transformers and PEFT as it is: an exported VL folder
/// gives the same logits in `Qwen3VLForConditionalGeneration`, and an exported adapter
/// attached by `PeftModel.from_pretrained` gives rmsweb's LoRA logits. Runs in the verl
/// venv (`.ci/install-verl.sh`); without it the test fails saying so.
#[test]
fn exported_vl_folder_and_adapter_load_in_transformers_and_peft() {
    let venv = crate::verl::venv();
    let py = venv.join("bin").join("python");
    assert!(
        py.exists(),
        "the verl venv is missing at {} (run `.ci/install-verl.sh`)",
        venv.display()
    );
    let dir = folder("tiny");
    let r = reference(&dir);
    let (model, cfg) = with_random_lora(&dir);
    let tmp = tempfile::tempdir().unwrap();
    let (base, adapter) = (tmp.path().join("base"), tmp.path().join("adapter"));
    model.save_dir(&base).unwrap();
    model
        .export_adapter(&cfg, &base.to_string_lossy(), &adapter)
        .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/vl/transformers_logits.py");
    let theirs = |with_adapter: bool| -> Tensor {
        let out = tmp
            .path()
            .join(format!("logits-{with_adapter}.safetensors"));
        let mut cmd = std::process::Command::new(&py);
        cmd.arg(&script)
            .arg(&base)
            .arg(dir.join("reference.safetensors"))
            .arg(&out);
        if with_adapter {
            cmd.arg("--adapter").arg(&adapter);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        candle_core::safetensors::load(&out, &Device::Cpu).unwrap()["logits"].clone()
    };
    let d_base = max_abs_diff(&theirs(false), &r.logits);
    let d_lora = max_abs_diff(&theirs(true), &logits(&model, &r));
    eprintln!(
        "transformers on exported folder {d_base:.2e}, peft on exported adapter {d_lora:.2e}"
    );
    assert!(d_base < TOLERANCE && d_lora < TOLERANCE);
}
