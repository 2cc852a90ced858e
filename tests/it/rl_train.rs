//! Salvage-DS RL runs on a toy click task: reward improvement, refill cap, salvage
//! mask through the real tokenizer, every ablation mode, stop and resume.
//!
//! The toy: four tasks "Click the W button" over the same four buttons; each
//! trajectory has three steps. Steps 0 and 1 are always right; at step 2 half of the
//! (all "successful") trajectories click a wrong button, so the SFT policy learns to
//! be right about half of the time there — an imperfect start with reward contrast
//! (1.0 vs 0.3). The mined pairs hold step 2 (the contrast) and step 1 (mastered) of
//! each task with the right target.
//!
//! The curated samples (`sft/samples.jsonl`, which SFT and the RL prompts both read)
//! are written with a compact prompt ("Step 3. Click the Alpha button.") and a short
//! answer with reasoning ("Alpha 3: click(2)") instead of the full project prompt,
//! so that the whole SFT + RL pipeline runs in seconds on a CPU.

use rmsweb::action::Action;
use rmsweb::curate::flatten::{Sample, SampleKind, SampleMessage, samples_path, write_samples};
use rmsweb::mine::MinedPair;
use rmsweb::mine::pair::{FailureMode, Gates, LabelSource, PairKind, PairScores, StepRef};
use rmsweb::model::{Decoder, DecoderConfig, tokenizer};
use rmsweb::train::rl::config::{PromptSource, RlConfig};
use rmsweb::train::rl::groups::Mode;
use rmsweb::train::rl::loss::salvage_nll;
use rmsweb::train::rl::seqs::{salvage, token_logps};
use rmsweb::train::rl::trainer;
use rmsweb::train::run::{RunDir, RunState};
use rmsweb::train::sft::{self, Outcome, SftConfig};
use rmsweb::trajectory::{Dataset, Element, ModelOutput, State, Step, Task, Trajectory};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

const WORDS: [&str; 4] = ["Alpha", "Bravo", "Charlie", "Delta"];

fn elements() -> Vec<Element> {
    WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| Element {
            index: i as u32 + 1,
            tag: "button".into(),
            role: "button".into(),
            text: (*w).into(),
            ..Default::default()
        })
        .collect()
}

fn click(i: u32) -> Action {
    Action::new("click", json!({ "index": i }))
}

/// The right index of task `k` at step `s`.
fn right(k: usize, s: u32) -> u32 {
    ((k + s as usize) % 4) as u32 + 1
}

fn toy_dataset(root: &Path) {
    let mut ds = Dataset::create(root, "rl-toy", "synthetic RL toy").unwrap();
    let mut tasks = Vec::new();
    let mut trajs = Vec::new();
    let mut pairs = Vec::new();
    for (k, word) in WORDS.iter().enumerate() {
        let task_id = format!("task{k}");
        tasks.push(Task {
            task_id: task_id.clone(),
            website: "toy.test".into(),
            domain: "toy".into(),
            category: "click".into(),
            instruction: format!("Click the {word} button"),
            source: "synthetic".into(),
        });
        for a in 0..4 {
            let noisy = a >= 2;
            let steps = (0..3u32)
                .map(|s| {
                    let idx = if s == 2 && noisy {
                        right(k, s) % 4 + 1
                    } else {
                        right(k, s)
                    };
                    Step {
                        index: s,
                        state: State {
                            url: format!("http://toy.test/{k}/{s}"),
                            title: "Toy".into(),
                            elements: elements(),
                            ..Default::default()
                        },
                        output: ModelOutput {
                            actions: vec![click(idx)],
                            ..Default::default()
                        },
                        result: vec![],
                        timing: None,
                        ..Default::default()
                    }
                })
                .collect();
            trajs.push(Trajectory {
                id: format!("t{k}-{a}"),
                task_id: task_id.clone(),
                attempt: a + 1,
                round: 1,
                reflection: None,
                source: "test".into(),
                teacher: "test".into(),
                outcome: rmsweb::trajectory::Outcome {
                    success: true,
                    ..Default::default()
                },
                steps,
            });
        }
        for s in [1u32, 2] {
            pairs.push(MinedPair {
                id: format!("t{k}-0@{s}~t{k}-3@{s}"),
                task_id: task_id.clone(),
                domain: "toy".into(),
                kind: PairKind::FailContrast,
                success: StepRef {
                    trajectory: format!("t{k}-0"),
                    step: s,
                },
                loc: StepRef {
                    trajectory: format!("t{k}-3"),
                    step: s,
                },
                target_action: click(right(k, s)),
                loc_action: click(right(k, s) % 4 + 1),
                scores: PairScores::default(),
                failure_mode: FailureMode {
                    category: "wrong_element".into(),
                    confidence: 1.0,
                    source: LabelSource::Heuristic,
                },
                gates: Gates {
                    validity: true,
                    visual: true,
                    progress: true,
                },
                evidence: vec![],
                loc_failure: None,
            });
        }
    }
    ds.append_tasks(&tasks).unwrap();
    ds.append_trajectories(&trajs).unwrap();
    let samples: Vec<Sample> = trajs
        .iter()
        .flat_map(|t| {
            let k: usize = t.task_id.trim_start_matches("task").parse().unwrap();
            t.steps.iter().map(move |st| {
                let idx = st.output.actions[0].int_param("index").unwrap();
                let msg = |role: &str, content: String| SampleMessage {
                    role: role.into(),
                    content,
                };
                Sample {
                    id: format!("{}#{}", t.id, st.index),
                    kind: SampleKind::Action,
                    trajectory: t.id.clone(),
                    step: st.index,
                    task_id: t.task_id.clone(),
                    prompt_format: "toy/1".into(),
                    messages: vec![
                        msg(
                            "user",
                            format!("Step {}. Click the {} button.", st.index + 1, WORDS[k]),
                        ),
                        msg(
                            "assistant",
                            format!("{} {}: click({idx})", WORDS[k], st.index + 1),
                        ),
                    ],
                    images: vec![],
                }
            })
        })
        .collect();
    write_samples(&samples_path(&ds), &samples).unwrap();
    std::fs::create_dir_all(root.join("mined")).unwrap();
    let text: String = pairs
        .iter()
        .map(|p| serde_json::to_string(p).unwrap() + "\n")
        .collect();
    std::fs::write(root.join("mined/pairs.jsonl"), text).unwrap();
}

/// The toy dataset and a briefly SFT'd tiny policy on it (SFT seed 42), built once per
/// test binary.
fn sft_init() -> &'static (PathBuf, PathBuf) {
    static INIT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    INIT.get_or_init(|| sft_policy(42))
}

/// A fresh toy dataset and a tiny policy SFT'd on it from `seed`.
fn sft_policy(seed: u64) -> (PathBuf, PathBuf) {
    {
        let root = tempfile::tempdir().unwrap().keep();
        let ds = root.join("ds");
        toy_dataset(&ds);
        let sets: Vec<String> = [
            "tiny.vocab_size=300",
            // A toy corpus: merge what repeats at all (the preset's threshold is sized
            // for real collections).
            "tiny.bpe_min_frequency=2",
            "tiny.hidden_size=64",
            "tiny.num_hidden_layers=2",
            "tiny.num_attention_heads=4",
            "tiny.num_key_value_heads=2",
            "tiny.head_dim=16",
            "tiny.intermediate_size=128",
            "micro_batch=8",
            "grad_accum=1",
            "context=128",
            "lr=0.01",
            "warmup_ratio=0.05",
            "epochs=30",
            "checkpoint_every=0",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("seed={seed}")])
        .collect();
        let cfg = SftConfig::preset("tiny", &ds, None)
            .unwrap()
            .with_overrides(&sets)
            .unwrap();
        let sft_dir = root.join("sft");
        let run = RunDir::open(&sft_dir).unwrap();
        let out = sft::train(
            &cfg,
            &run,
            false,
            Arc::new(AtomicBool::new(false)),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(out, Outcome::Finished);
        (ds, sft_dir)
    }
}

fn rl_config(mode: Mode, sets: &[&str]) -> RlConfig {
    let (ds, init) = sft_init();
    rl_config_from(ds, init, mode, sets)
}

fn rl_config_from(ds: &Path, init: &Path, mode: Mode, sets: &[&str]) -> RlConfig {
    let mut all: Vec<String> = [
        "n=8",
        "train_batch=4",
        "mini_batch=2",
        "micro_batch=16",
        "gen_batch=4",
        "max_gen_batches=3",
        "salvage_unit=2",
        "salvage_cap=4",
        "lr=0.001",
        "lora.r=8",
        "lora.alpha=16.0",
        "max_new_tokens=32",
        "probe_groups=4",
        "sharpening.window=4",
        "checkpoint_every=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    all.extend(sets.iter().map(|s| s.to_string()));
    RlConfig::preset("tiny", mode, PromptSource::Mined, init, ds)
        .unwrap()
        .with_overrides(&all)
        .unwrap()
}

fn run_rl(cfg: &RlConfig, dir: &Path) -> Outcome {
    let run = RunDir::open(dir).unwrap();
    trainer::train(
        cfg,
        &run,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    )
    .unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn metric(m: &Value, k: &str) -> f64 {
    m["data"][k]
        .as_f64()
        .unwrap_or_else(|| panic!("metric {k} missing in {m}"))
}

/// FORMATS.md's RL keys plus the alert flag: the metric table (`runs::synth::KEYS`)
/// without the SFT loss.
fn rl_keys() -> impl Iterator<Item = &'static str> {
    rmsweb::runs::synth::KEYS
        .into_iter()
        .filter(|k| *k != "sft/loss")
}

/// The mean rollout reward of the first and last four of 16 Salvage-DS steps, with the
/// metrics of the run in `dir`.
fn reward_rise(ds: &Path, init: &Path, dir: &Path) -> (f64, f64, Vec<Value>) {
    let cfg = rl_config_from(ds, init, Mode::SalvageDs, &["steps=16"]);
    assert_eq!(run_rl(&cfg, dir), Outcome::Finished);
    let m = lines(&dir.join("metrics.jsonl"));
    assert_eq!(m.len(), 16);
    let reward: Vec<f64> = m.iter().map(|x| metric(x, "critic/score/mean")).collect();
    eprintln!("critic/score/mean per step: {reward:?}");
    let first = reward[..4].iter().sum::<f64>() / 4.0;
    let last = reward[12..].iter().sum::<f64>() / 4.0;
    (first, last, m)
}

#[test]
fn salvage_ds_raises_the_mean_rollout_reward_of_an_imperfect_sft_policy() {
    // Which prompts a 48-sample toy SFT leaves unsolved depends on its seed (and on
    // float rounding: one ulp in the rotary table changes it); from some inits 16 steps
    // barely move the reward (SFT seed 42 after the transformers-exact rotary table:
    // 0.62 -> 0.64), from most they raise it by 0.08-0.12. The claim is tested over four
    // SFT inits: the mean rise across them.
    let d = tempfile::tempdir().unwrap();
    let (ds, init) = sft_init();
    let (first, last, m) = reward_rise(ds, init, d.path());
    let mut rises = vec![(first, last)];
    for seed in [1, 2, 3] {
        let (ds, init) = sft_policy(seed);
        let dir = tempfile::tempdir().unwrap();
        let (f, l, _) = reward_rise(&ds, &init, dir.path());
        rises.push((f, l));
    }
    for line in &m {
        for k in rl_keys() {
            metric(line, k);
        }
    }
    for (f, _) in &rises {
        assert!(
            *f < 0.95,
            "the SFT policies should start imperfect: {rises:?}"
        );
    }
    let mean_rise = rises.iter().map(|(f, l)| l - f).sum::<f64>() / rises.len() as f64;
    assert!(
        mean_rise > 0.04,
        "mean rollout reward should rise (first, last four steps per SFT init): {rises:?}"
    );
    // Rollout log: every sampled group, its gate and route.
    let r = lines(&d.path().join("rollouts.jsonl"));
    let sampled: f64 = m.iter().map(|x| metric(x, "salvage/sampled_groups")).sum();
    assert_eq!(r.len() as f64, sampled);
    for g in &r {
        assert_eq!(g["samples"].as_array().unwrap().len(), 8);
        assert!(["rl", "salvage", "discarded"].contains(&g["routed"].as_str().unwrap()));
        assert!(["accepted", "std_gate", "competence_gate"].contains(&g["gate"].as_str().unwrap()));
        let s = &g["samples"][0];
        assert!(s["text"].is_string() && s["reward"].is_number() && s["rule"].is_string());
    }
    // The step-1 prompts are mastered: std-gated and salvaged.
    assert!(
        r.iter()
            .any(|g| g["gate"] == "std_gate" && g["routed"] == "salvage"),
        "mastered groups are salvaged"
    );
    let status = RunDir::read_status(d.path()).unwrap();
    assert_eq!(status.state, RunState::Finished);
    let toml = std::fs::read_to_string(d.path().join("run.toml")).unwrap();
    assert!(toml.contains("kind = \"rl\"") && toml.contains("mode = \"salvage-ds\""));
    // The final checkpoint is a loadable model folder of the RL policy.
    let ck = d.path().join("checkpoints/step-16");
    assert!(ck.join("adapter/adapter_config.json").is_file());
    rmsweb::model::LocalModelPolicy::from_checkpoint(&ck, &candle_core::Device::Cpu).unwrap();
}

#[test]
fn refill_cap_hit_with_every_group_std_rejected_trains_on_salvage_without_crashing() {
    // ε_σ = 1 rejects every group (population std ≤ 1 always).
    let cfg = rl_config(
        Mode::SalvageDs,
        &[
            "steps=2",
            "eps_sigma=1.0",
            "gen_batch=3",
            "max_gen_batches=2",
        ],
    );
    let d = tempfile::tempdir().unwrap();
    assert_eq!(run_rl(&cfg, d.path()), Outcome::Finished);
    let m = lines(&d.path().join("metrics.jsonl"));
    assert_eq!(m.len(), 2);
    for x in &m {
        assert_eq!(metric(x, "train/num_gen_batches"), 2.0);
        assert_eq!(metric(x, "salvage/accepted_groups"), 0.0);
        assert_eq!(metric(x, "salvage/std_gate_reject_share"), 1.0);
        // D = 6 rejected groups → S = 2·⌊min(6, 4)/2⌋ = 4, all mastered.
        assert_eq!(metric(x, "salvage/salvage_groups"), 4.0);
        assert!(metric(x, "salvage/nll") > 0.0);
        assert_eq!(metric(x, "actor/pg_loss"), 0.0);
        assert!(metric(x, "train/updates") >= 1.0);
    }
    let anchor_free = rl_config(
        Mode::AnchorFree,
        &[
            "steps=1",
            "eps_sigma=1.0",
            "gen_batch=2",
            "max_gen_batches=2",
        ],
    );
    let d = tempfile::tempdir().unwrap();
    assert_eq!(run_rl(&anchor_free, d.path()), Outcome::Finished);
    let m = lines(&d.path().join("metrics.jsonl"));
    // Nothing to train on: logged, not a crash.
    assert_eq!(metric(&m[0], "train/updates"), 0.0);
    assert_eq!(metric(&m[0], "salvage/salvage_groups"), 0.0);
    assert_eq!(metric(&m[0], "train/num_gen_batches"), 2.0);
}

#[test]
fn every_ablation_mode_runs_and_logs_every_metric_with_its_own_wiring() {
    for mode in [Mode::AnchorFree, Mode::Dapo, Mode::Grpo] {
        // Several groups decode together here (the batched, left-padded path).
        let cfg = rl_config(mode, &["steps=2", "max_gen_batches=2", "decode_rows=32"]);
        let d = tempfile::tempdir().unwrap();
        assert_eq!(run_rl(&cfg, d.path()), Outcome::Finished, "{mode:?}");
        let m = lines(&d.path().join("metrics.jsonl"));
        assert_eq!(m.len(), 2, "{mode:?}");
        for line in &m {
            for k in rl_keys() {
                metric(line, k);
            }
            // No salvage anywhere but salvage-ds.
            assert_eq!(metric(line, "salvage/salvage_groups"), 0.0, "{mode:?}");
            assert_eq!(metric(line, "salvage/nll"), 0.0, "{mode:?}");
        }
        let r = lines(&d.path().join("rollouts.jsonl"));
        for g in &r {
            let gate = g["gate"].as_str().unwrap();
            match mode {
                // GRPO keeps every group.
                Mode::Grpo => assert_eq!(gate, "accepted"),
                // DAPO has no competence gate.
                Mode::Dapo => assert_ne!(gate, "competence_gate"),
                _ => {}
            }
            assert_ne!(g["routed"], "salvage");
        }
        let toml = std::fs::read_to_string(d.path().join("run.toml")).unwrap();
        let clip_high = match mode {
            Mode::Dapo => "clip_high = 0.28",
            Mode::Grpo => "clip_high = 0.2\n",
            _ => "clip_high = 0.32",
        };
        assert!(toml.contains(clip_high), "{mode:?}: {toml}");
    }
}

#[test]
fn salvage_loss_reaches_only_the_action_tokens_of_the_spliced_sequence() {
    let texts = [
        r#"{"evaluation_previous_goal":"ok","memory":"m","next_goal":"go","action":[{"click":{"index":3}}]}"#,
        "<|im_start|>user\nClick the Delta button<|im_end|>\n<|im_start|>assistant\n",
    ];
    let tok = tokenizer::train_bpe(texts.iter().cycle().take(40), 400, 2).unwrap();
    let cfg = DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
        vocab_size: tok.get_vocab_size(true),
        max_position_embeddings: 512,
        ..super::model::tiny_config(true)
    };
    let w = Decoder::random_weights(&cfg, 5).unwrap();
    let model = Decoder::from_weights(
        &cfg,
        w,
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
        true,
    )
    .unwrap();
    let prompt = tok.encode(texts[1], false).unwrap().get_ids().to_vec();
    let response = r#"{"evaluation_previous_goal":"ok","memory":"m","next_goal":"go","action":[{"click":{"index":3}}]} trailing"#;
    let (seq, spliced) = salvage(&tok, &prompt, response, &[click(1)]).unwrap();
    // The reasoning is the rollout's own; only the action changed.
    assert!(spliced.starts_with(
        r#"{"evaluation_previous_goal":"ok","memory":"m","next_goal":"go","action":"#
    ));
    assert!(spliced.contains(r#"[{"click":{"index":1}}]"#), "{spliced}");
    let resp_ids = &seq.ids[seq.resp_start..];
    let masked: Vec<u32> = resp_ids
        .iter()
        .zip(&seq.mask)
        .filter(|(_, m)| **m > 0.0)
        .map(|(t, _)| *t)
        .collect();
    let masked_text = tok.decode(&masked, false).unwrap();
    assert!(
        masked_text.contains(r#"[{"click":{"index":1}}]"#),
        "{masked_text}"
    );
    // At most the straddling tokens at the edges add a few bytes.
    assert!(
        masked_text.len() <= r#"[{"click":{"index":1}}]"#.len() + 4,
        "{masked_text}"
    );
    let unmasked = seq.mask.iter().filter(|m| **m == 0.0).count();
    assert!(unmasked > 5, "reasoning tokens exist and are unmasked");
    // Through the model: the gradient of the salvage NLL w.r.t. each token's
    // log-prob is non-zero exactly on the masked (action) tokens.
    let lp = token_logps(&model, &[&seq], 1.0, false).unwrap();
    let leaf = candle_core::Var::from_tensor(&lp.logp.detach()).unwrap();
    let nll = salvage_nll(leaf.as_tensor(), &lp.mask).unwrap();
    let g = nll.backward().unwrap();
    let g: Vec<f32> = g
        .get(leaf.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    for (k, (gk, m)) in g.iter().zip(&seq.mask).enumerate() {
        assert_eq!(*gk != 0.0, *m > 0.0, "token {k}: grad {gk}, mask {m}");
    }
    // And the NLL moves the model's parameters (the loss is wired to the weights).
    let full = salvage_nll(&lp.logp, &lp.mask).unwrap();
    let grads = full.backward().unwrap();
    assert!(
        model
            .trainable_vars()
            .iter()
            .any(|(_, v)| grads.get(v.as_tensor()).is_some())
    );
}

#[test]
fn sigterm_style_stop_checkpoints_and_resume_continues_to_the_end() {
    let cfg = rl_config(Mode::SalvageDs, &["steps=3", "max_gen_batches=1"]);
    let d = tempfile::tempdir().unwrap();
    let run = RunDir::open(d.path()).unwrap();
    let stop = Arc::new(AtomicBool::new(true));
    let out = trainer::train(&cfg, &run, false, stop, &mut |_| {}).unwrap();
    assert_eq!(out, Outcome::Stopped);
    let status = RunDir::read_status(d.path()).unwrap();
    assert_eq!((status.state, status.step), (RunState::Stopped, 1));
    assert!(
        d.path()
            .join("checkpoints/step-1/trainer_state.json")
            .is_file()
    );
    let out = trainer::resume(d.path(), Arc::new(AtomicBool::new(false)), &mut |_| {}).unwrap();
    assert_eq!(out, Outcome::Finished);
    let m = lines(&d.path().join("metrics.jsonl"));
    let steps: Vec<u64> = m.iter().map(|x| x["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![1, 2, 3]);
    let status = RunDir::read_status(d.path()).unwrap();
    assert_eq!((status.state, status.step), (RunState::Finished, 3));
    // The resumed run drew new prompts (the stream position was restored), not the
    // first batch again.
    let r = lines(&d.path().join("rollouts.jsonl"));
    let ids = |s: u64| -> Vec<String> {
        r.iter()
            .filter(|g| g["step"] == s)
            .map(|g| g["prompt_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_ne!(ids(1), ids(2));
    // A run folder is never overwritten by a new run.
    let again = trainer::train(
        &cfg,
        &RunDir::open(d.path()).unwrap(),
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    );
    assert!(format!("{:#}", again.unwrap_err()).contains("train resume"));
}

fn wait_for(mut cond: impl FnMut() -> bool, secs: u64) -> bool {
    let t = std::time::Instant::now();
    while t.elapsed().as_secs() < secs {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    false
}

/// The test's RL overrides as `--set` arguments.
fn cli_sets(cmd: &mut std::process::Command, extra: &[&str]) {
    for s in [
        "n=8",
        "train_batch=4",
        "mini_batch=2",
        "gen_batch=4",
        "max_gen_batches=2",
        "salvage_unit=2",
        "salvage_cap=4",
        "lora.r=8",
        "lora.alpha=16.0",
        "max_new_tokens=32",
        "checkpoint_every=0",
    ]
    .iter()
    .chain(extra)
    {
        cmd.args(["--set", s]);
    }
}

#[test]
fn cli_rl_run_stops_on_sigterm_and_train_resume_dispatches_on_the_run_kind() {
    let (_, init) = sft_init();
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("rl");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"));
    // The dataset comes from the SFT run's run.toml.
    cmd.args([
        "train",
        "rl",
        "--preset",
        "tiny",
        "--mode",
        "salvage-ds",
        "--init",
    ])
    .arg(init)
    .arg("--run-dir")
    .arg(&run)
    .args(["--steps", "100000"]);
    cli_sets(&mut cmd, &[]);
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(
        || lines(&run.join("metrics.jsonl")).len() >= 2,
        120
    ));
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let status = RunDir::read_status(&run).unwrap();
    assert_eq!(status.state, RunState::Stopped);
    let stopped_at = status.step;
    assert!(
        run.join(format!("checkpoints/step-{stopped_at}/trainer_state.json"))
            .is_file()
    );
    // Shorten the run so that resume finishes: `train resume` reads kind = "rl".
    let toml = std::fs::read_to_string(run.join("run.toml")).unwrap();
    let toml = toml.replace("steps = 100000", &format!("steps = {}", stopped_at + 1));
    std::fs::write(run.join("run.toml"), toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["train", "resume"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = RunDir::read_status(&run).unwrap();
    assert_eq!(
        (status.state, status.step),
        (RunState::Finished, stopped_at + 1)
    );
    let m = lines(&run.join("metrics.jsonl"));
    assert_eq!(m.last().unwrap()["step"].as_u64(), Some(stopped_at + 1));
    // Bad input is a clear error, not a panic.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["train", "rl", "--preset", "huge", "--init"])
        .arg(init)
        .arg("--run-dir")
        .arg(d.path().join("huge"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown preset `huge`"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["train", "rl", "--preset", "tiny", "--init"])
        .arg(d.path())
        .args(["--dataset"])
        .arg(d.path())
        .arg("--run-dir")
        .arg(d.path().join("bad"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--init"), "{err}");
}

/// `train start FILE` (how the recipe starts its children) runs the whole config
/// it reads, and the run's run.toml holds the same config; a bad file is refused
/// naming the file and the field, before any run folder is written.
#[test]
fn train_start_runs_a_whole_config_file_and_names_bad_fields() {
    let (ds, init) = sft_init();
    let cfg = RlConfig::preset("tiny", Mode::SalvageDs, PromptSource::Mined, init, ds)
        .unwrap()
        .with_overrides(&[
            "steps=1".into(),
            "max_new_tokens=16".into(),
            "checkpoint_every=0".into(),
        ])
        .unwrap();
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("rl.toml");
    std::fs::write(&file, toml::to_string_pretty(&cfg).unwrap()).unwrap();
    let start = |file: &Path, run: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
            .args(["train", "start"])
            .arg(file)
            .arg("--run-dir")
            .arg(run)
            .output()
            .unwrap()
    };
    let run = d.path().join("run");
    let out = start(&file, &run);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = RlConfig::from_toml(&std::fs::read_to_string(run.join("run.toml")).unwrap());
    assert_eq!(written.unwrap(), cfg);
    assert_eq!(RunDir::read_status(&run).unwrap().state, RunState::Finished);
    for (bad, field) in [
        (
            toml::to_string(&cfg)
                .unwrap()
                .replace("\nn = 8\n", "\nn = 1\n"),
            "`n`",
        ),
        (
            format!("bogus = 1\n{}", toml::to_string(&cfg).unwrap()),
            "bogus",
        ),
        ("kind = \"ppo\"\n".to_string(), "`kind`"),
    ] {
        let f = d.path().join("bad.toml");
        std::fs::write(&f, &bad).unwrap();
        let run = d.path().join("never");
        let out = start(&f, &run);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("bad.toml") && err.contains(field),
            "{field}: {err}"
        );
        assert!(!run.join("run.toml").exists());
    }
}

#[test]
fn full_corpus_prompts_are_the_sft_action_samples_and_bad_pairs_name_their_line() {
    let (ds, _) = sft_init();
    let dataset = Dataset::open(ds).unwrap();
    let (full, skipped) =
        rmsweb::train::rl::prompts::load(&dataset, PromptSource::FullCorpus).unwrap();
    assert_eq!((full.len(), skipped.0.len()), (48, 0));
    let p = full.iter().find(|p| p.id == "t1-2#2").unwrap();
    // The target is the sample's own (noisy) answer, the state's elements come along.
    assert_eq!(p.targets, vec![click(right(1, 2) % 4 + 1)]);
    assert_eq!(p.elements.len(), 4);
    assert_eq!(p.messages.len(), 1);
    assert!(p.messages.iter().all(|m| m.role != "assistant"));
    assert_eq!(p.instruction, "Click the Bravo button");
    let (mined, _) = rmsweb::train::rl::prompts::load(&dataset, PromptSource::Mined).unwrap();
    assert_eq!(mined.len(), 8);
    let m = mined.iter().find(|p| p.id == "t1-0@2~t1-3@2").unwrap();
    assert_eq!(m.targets, vec![click(right(1, 2))]);
    // Same messages as the SFT sample of the success step.
    let same = full.iter().find(|p| p.id == "t1-0#2").unwrap();
    assert_eq!(m.messages, same.messages);

    // A broken pairs file is an error naming file, line and field.
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("ds");
    toy_dataset(&copy);
    let pairs = copy.join("mined/pairs.jsonl");
    let mut text = std::fs::read_to_string(&pairs).unwrap();
    text.push_str("{\"id\": \"x\", \"task_id\": 5}\n");
    std::fs::write(&pairs, text).unwrap();
    let err = format!(
        "{:#}",
        rmsweb::train::rl::prompts::load(&Dataset::open(&copy).unwrap(), PromptSource::Mined)
            .unwrap_err()
    );
    assert!(err.contains("pairs.jsonl:9"), "{err}");
    assert!(err.contains("task_id"), "{err}");
    // And a full-corpus RL run works end to end.
    let cfg = rl_config(Mode::SalvageDs, &["steps=1", "prompts=\"full-corpus\""]);
    let out = tempfile::tempdir().unwrap();
    assert_eq!(run_rl(&cfg, out.path()), Outcome::Finished);
    let r = lines(&out.path().join("rollouts.jsonl"));
    assert!(
        r.iter()
            .all(|g| g["prompt_id"].as_str().unwrap().contains('#'))
    );
}

/// The toy dataset in `dir/ds` without its curated samples: RL prompts are then
/// rendered by the project's prompt renderer.
fn uncurated_toy(dir: &Path) -> PathBuf {
    let root = dir.join("ds");
    toy_dataset(&root);
    std::fs::remove_file(root.join("sft/samples.jsonl")).unwrap();
    root
}

#[test]
fn mined_prompts_without_curated_samples_use_the_project_prompt_renderer() {
    let d = tempfile::tempdir().unwrap();
    let root = uncurated_toy(d.path());
    let ds = Dataset::open(&root).unwrap();
    let (mined, skipped) = rmsweb::train::rl::prompts::load(&ds, PromptSource::Mined).unwrap();
    assert_eq!((mined.len(), skipped.0.len()), (8, 0));
    let p = mined.iter().find(|p| p.id == "t2-0@2~t2-3@2").unwrap();
    assert_eq!(p.messages[0].role, "system");
    assert_eq!(
        p.messages[0].content,
        rmsweb::policy::prompt::system_prompt()
    );
    let user = &p.messages[1].content;
    assert!(user.contains("Click the Charlie button"), "{user}");
    // The success trajectory's history is part of the state shown (step 3 of 3).
    assert!(user.contains("Step 3 of at most"), "{user}");
    assert_eq!(p.targets, vec![click(right(2, 2))]);
    // What grounded rollouts need: the instruction and the element lines shown.
    assert_eq!(p.instruction, "Click the Charlie button");
    assert_eq!(p.shown, vec![1, 2, 3, 4]);
}

/// `grounded = true`: every rollout is (a prefix of) an answer the prompt's grounded
/// schema accepts, though the toy SFT policy learnt a compact non-JSON answer.
#[test]
fn grounded_rollouts_stay_inside_each_prompts_schema() {
    use rmsweb::model::constrain::Schema;
    use rmsweb::policy::grounding::answer_schema;
    let d = tempfile::tempdir().unwrap();
    let root = uncurated_toy(d.path());
    let (_, init) = sft_init();
    let cfg = rl_config_from(
        &root,
        init,
        Mode::SalvageDs,
        &["steps=1", "grounded=true", "max_new_tokens=40"],
    );
    let out = d.path().join("run");
    assert_eq!(run_rl(&cfg, &out), Outcome::Finished);
    let log = std::fs::read_to_string(out.join("stdout.log")).unwrap_or_default();
    assert!(log.contains("rollouts decode grounded"), "{log}");
    let groups = lines(&out.join("rollouts.jsonl"));
    assert!(!groups.is_empty());
    let mut texts = 0;
    for g in &groups {
        // Pair ids read `t<task>-<attempt>@<step>~…`.
        let id = g["prompt_id"].as_str().unwrap();
        let k: usize = id[1..id.find('-').unwrap()].parse().unwrap();
        let instruction = format!("Click the {} button", WORDS[k]);
        let schema =
            Schema::compile(&answer_schema(&instruction, &[1, 2, 3, 4], &elements())).unwrap();
        for s in g["samples"].as_array().unwrap() {
            let text = s["text"].as_str().unwrap();
            let mut m = schema.matcher();
            assert!(m.advance(text.as_bytes()), "outside the schema: {text}");
            texts += 1;
        }
    }
    assert!(texts >= 8, "{texts} rollouts");
}

#[test]
fn rl_from_a_lora_sft_run_checkpoints_one_adapter_loadable_on_the_original_base() {
    let (ds, init) = sft_init();
    // The toy SFT model serves as the "pretrained" base of a LoRA SFT run.
    let base = rmsweb::train::rl::policy::resolve_init(init).unwrap();
    let d = tempfile::tempdir().unwrap();
    let sets: Vec<String> = [
        "lora.r=4",
        "lora.alpha=8.0",
        "epochs=1",
        "max_steps=2",
        "micro_batch=8",
        "grad_accum=1",
        "context=128",
        "lr=0.01",
        "checkpoint_every=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let scfg = SftConfig::preset("qwen3-lora", ds, Some(&base))
        .unwrap()
        .with_overrides(&sets)
        .unwrap();
    let lsft = d.path().join("lsft");
    let out = sft::train(
        &scfg,
        &RunDir::open(&lsft).unwrap(),
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out, Outcome::Finished);
    let mut cfg = rl_config(Mode::SalvageDs, &["steps=1", "max_gen_batches=1"]);
    cfg.init = lsft.clone();
    let rl = d.path().join("rl");
    assert_eq!(run_rl(&cfg, &rl), Outcome::Finished);
    let ck = rl.join("checkpoints/step-1");
    let ac: Value = serde_json::from_str(
        &std::fs::read_to_string(ck.join("adapter/adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ac["r"], 12, "SFT rank 4 + RL rank 8");
    assert_eq!(
        Path::new(ac["base_model_name_or_path"].as_str().unwrap()),
        std::fs::canonicalize(&base).unwrap()
    );
    // Loading the RL checkpoint like any LoRA checkpoint gives the trained policy.
    let loaded =
        rmsweb::model::LocalModelPolicy::from_checkpoint(&ck, &candle_core::Device::Cpu).unwrap();
    let policy = rmsweb::train::rl::policy::load_policy(&cfg).unwrap();
    let trained = rmsweb::model::weights::load_file(
        &ck.join("trainable.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    rmsweb::train::rl::checkpoint::load_adapters(policy.model(), &trained).unwrap();
    let prompt = loaded
        .tokenizer
        .encode(
            "<|im_start|>user\nStep 3. Click the Bravo button.<|im_end|>\n<|im_start|>assistant\n",
            false,
        )
        .unwrap()
        .get_ids()
        .to_vec();
    let resp = loaded
        .tokenizer
        .encode("Bravo 3: click(3)", false)
        .unwrap()
        .get_ids()
        .to_vec();
    let seq = rmsweb::train::rl::seqs::TrainSeq::rl(&prompt, &resp);
    let a = token_logps(&loaded.model, &[&seq], 1.0, false)
        .unwrap()
        .logp;
    let b = token_logps(policy.model(), &[&seq], 1.0, false)
        .unwrap()
        .logp;
    let diff = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-3, "max |Δ log p| = {diff}");
    // The RL adapter moved the policy away from the SFT one.
    policy.model().set_adapters_enabled(false);
    let c = token_logps(policy.model(), &[&seq], 1.0, false)
        .unwrap()
        .logp;
    let moved = (c - token_logps(&loaded.model, &[&seq], 1.0, false)
        .unwrap()
        .logp)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(moved > 0.0);
}

/// `pg_tokens = "action"`: from the same seed the grounded rollouts are the same, but
/// the update is not (their free text no longer carries the advantage), and the run
/// records the choice; a bad value names the field.
#[test]
fn pg_tokens_action_changes_the_update_not_the_rollouts() {
    let d = tempfile::tempdir().unwrap();
    let (root, init) = sft_init();
    let run = |pg: &str| {
        let cfg = rl_config(
            Mode::Grpo,
            &["steps=1", "kl_coef=0.0", &format!("pg_tokens=\"{pg}\"")],
        );
        let out = d.path().join(pg);
        assert_eq!(run_rl(&cfg, &out), Outcome::Finished);
        let texts: Vec<Value> = lines(&out.join("rollouts.jsonl"))
            .iter()
            .flat_map(|g| g["samples"].as_array().unwrap().clone())
            .map(|s| s["text"].clone())
            .collect();
        let weights = std::fs::read(out.join("checkpoints/step-1/model.safetensors")).unwrap();
        let toml = std::fs::read_to_string(out.join("run.toml")).unwrap();
        (texts, weights, toml)
    };
    let (texts_r, weights_r, toml_r) = run("response");
    let (texts_a, weights_a, toml_a) = run("action");
    assert!(texts_r.len() >= 8, "{} rollouts", texts_r.len());
    // Some answers parse with tokens before their action (the object's opening, free
    // text): those are what the mask leaves out.
    assert!(
        texts_r.iter().any(|t| {
            rmsweb::action::parse::parse_response(t.as_str().unwrap())
                .is_ok_and(|p| p.action_span.start > 0)
        }),
        "{texts_r:?}"
    );
    assert_eq!(texts_r, texts_a);
    assert_ne!(weights_r, weights_a, "the mask left the update unchanged");
    assert!(toml_r.contains("pg_tokens = \"response\""), "{toml_r}");
    assert!(toml_a.contains("pg_tokens = \"action\""), "{toml_a}");
    let e = RlConfig::preset("tiny", Mode::Grpo, PromptSource::Mined, init, root)
        .unwrap()
        .with_overrides(&["pg_tokens=\"thinking\"".into()])
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("pg_tokens"), "{e}");
}
