//! `train rl` on a Qwen3-VL checkpoint: rollouts and every log-probability see the
//! prompt's screenshot, the tower stays frozen while the decoder's RL adapter learns,
//! and the checkpoint is a Qwen3-VL folder the local policy loads.

use super::sft::{coloured_dataset, train};
use crate::hf::max_abs_diff;
use candle_core::{D, DType, Device};
use rmsweb::model::vl::prompt::Screenshot;
use rmsweb::model::vl::{Qwen3Vl, is_vl_folder};
use rmsweb::train::rl::config::{PromptSource, RlConfig};
use rmsweb::train::rl::groups::Mode;
use rmsweb::train::rl::policy::{encode_prompt, load_policy};
use rmsweb::train::rl::rollout::{GroupDecoding, RolloutConfig};
use rmsweb::train::rl::rollout_seeing::sample_groups_seeing;
use rmsweb::train::rl::seqs::{SeenImage, TrainSeq, row, token_logps};
use rmsweb::train::rl::{prompts, trainer};
use rmsweb::train::run::RunDir;
use rmsweb::trajectory::Dataset;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn vl_rl_config(ds: &Path, init: &Path) -> RlConfig {
    let sets: Vec<String> = [
        "steps=2",
        "n=4",
        "train_batch=2",
        "mini_batch=2",
        "micro_batch=8",
        "gen_batch=2",
        "max_gen_batches=2",
        "salvage_unit=1",
        "salvage_cap=2",
        "lr=0.01",
        "lora.r=4",
        "lora.alpha=8.0",
        "max_new_tokens=12",
        "probe_groups=2",
        "checkpoint_every=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    RlConfig::preset("tiny", Mode::SalvageDs, PromptSource::FullCorpus, init, ds)
        .unwrap()
        .with_overrides(&sets)
        .unwrap()
}

/// Trains `cfg` into `dir` to its end.
fn run_rl(cfg: &RlConfig, dir: &Path) {
    let run = RunDir::open(dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let out = trainer::train(cfg, &run, false, stop, &mut |_| {}).unwrap();
    assert_eq!(out, rmsweb::train::sft::Outcome::Finished);
}

/// Temperature of the sampling checks: high, so that rows draw unlikely tokens whose
/// log-probabilities move with any error in the positions.
const T: f64 = 4.0;

/// Log-probabilities at temperature [`T`] of `ids[start..]` from one full forward
/// pass of the whole model with the screenshot, if any.
fn full_pass(vl: &Qwen3Vl, ids: &[u32], start: usize, shot: Option<&Screenshot>) -> Vec<f32> {
    let logits = vl.forward(ids, shot.map(Screenshot::images), None).unwrap();
    let logits = (logits / T).unwrap();
    let lsm = candle_nn::ops::log_softmax(&logits.squeeze(0).unwrap(), D::Minus1).unwrap();
    let lsm: Vec<Vec<f32>> = lsm.to_vec2().unwrap();
    (start..ids.len())
        .map(|k| lsm[k - 1][ids[k] as usize])
        .collect()
}

#[test]
fn rl_on_a_tiny_vl_checkpoint_sees_the_screenshot_and_checkpoints_a_vl_folder() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    coloured_dataset(&ds, 4);
    let sft_run = d.path().join("sft");
    train("tiny-vl", &ds, &sft_run, 12);
    let init = sft_run.join("checkpoints/step-12");
    let cfg = vl_rl_config(&ds, &init);

    // Sampling: a group decodes after the prompt with its screenshot; each token's
    // recorded log-probability is the whole model's on a full pass with the image,
    // and scoring with the image gives the same numbers.
    let policy = load_policy(&cfg).unwrap();
    let vl = policy.vl().expect("a VL checkpoint gives a VL policy");
    let (ps, _) = prompts::load(&Dataset::open(&ds).unwrap(), PromptSource::FullCorpus).unwrap();
    assert!(ps.iter().all(|p| p.screenshot.is_some()));
    let ids: Vec<Vec<u32>> = ps
        .iter()
        .map(|p| encode_prompt(&policy, p, 4096).unwrap())
        .collect();
    let image_token = vl.token_ids().image_token_id;
    let shots: Vec<Arc<Screenshot>> = ps
        .iter()
        .map(|p| {
            let image = policy.image.as_ref().unwrap();
            Arc::new(Screenshot::load(p.screenshot.as_ref().unwrap(), image, &Device::Cpu).unwrap())
        })
        .collect();
    assert_eq!(
        ids[0].iter().filter(|&&t| t == image_token).count(),
        shots[0].tokens,
        "the placeholder is expanded to the image's token count"
    );
    let rc = RolloutConfig {
        temperature: T,
        top_p: 1.0,
        max_new_tokens: 6,
    };
    // Three groups decoding together: a 64x64 screenshot, a 96x128 one (more image
    // tokens, another rotary offset) and a prompt cut short (left padding), besides
    // a prompt shown no screenshot.
    let tall = d.path().join("tall.png");
    image::RgbImage::from_pixel(96, 128, image::Rgb([200, 120, 30]))
        .save(&tall)
        .unwrap();
    let mut tall_prompt = ps[2].clone();
    tall_prompt.screenshot = Some(tall.clone());
    let tall_ids = encode_prompt(&policy, &tall_prompt, 4096).unwrap();
    let short_ids = encode_prompt(&policy, &ps[3], ids[3].len() - 5).unwrap();
    let mut blind = ps[1].clone();
    blind.screenshot = None;
    let blind_ids = encode_prompt(&policy, &blind, 4096).unwrap();
    assert!(!blind_ids.contains(&image_token));
    let tall_shot =
        Arc::new(Screenshot::load(&tall, policy.image.as_ref().unwrap(), &Device::Cpu).unwrap());
    assert!(tall_shot.tokens > shots[0].tokens && tall_ids.len() > ids[0].len());
    let cases: Vec<(&[u32], Option<Arc<Screenshot>>)> = vec![
        (&ids[0], Some(shots[0].clone())),
        (&tall_ids, Some(tall_shot)),
        (&blind_ids, None),
        (&short_ids, Some(shots[3].clone())),
    ];
    let prompts2: Vec<&[u32]> = cases.iter().map(|c| c.0).collect();
    let seen: Vec<Option<&Screenshot>> = cases.iter().map(|c| c.1.as_deref()).collect();
    let groups = sample_groups_seeing(
        vl,
        &prompts2,
        &seen,
        3,
        &policy.stop,
        &rc,
        &[5, 6, 7, 8],
        GroupDecoding::default(),
    )
    .unwrap();
    for (g, group) in groups.iter().enumerate() {
        let prompt = prompts2[g];
        assert_eq!(group.len(), 3);
        for r in group {
            let mut all = prompt.to_vec();
            all.extend(&r.ids);
            let want = full_pass(vl, &all, prompt.len(), seen[g]);
            for (a, b) in r.logps.iter().zip(&want) {
                assert!((a - b).abs() < 1e-4, "group {g}: {:?} vs {want:?}", r.logps);
            }
            let seq = TrainSeq::rl(prompt, &r.ids).seeing(cases[g].1.clone().map(SeenImage));
            let lp = token_logps(policy.scorer(), &[&seq], T, false).unwrap();
            let got = row(&lp.logp, 0, r.ids.len()).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-4, "scored {got:?} vs {want:?}");
            }
        }
    }
    // The screenshot matters: the same response scored with the other colour's.
    let r = &groups[0][0];
    let seq = TrainSeq::rl(prompts2[0], &r.ids);
    let with = |k: usize| {
        let seq = seq.clone().seeing(Some(SeenImage(shots[k].clone())));
        token_logps(policy.scorer(), &[&seq], 1.0, false)
            .unwrap()
            .logp
    };
    let moved = max_abs_diff(&with(0), &with(2));
    assert!(moved > 1e-5, "another screenshot scores the same ({moved})");
    drop(policy);

    // Training: two steps; the checkpoint is a Qwen3-VL folder whose tower is the
    // SFT checkpoint's and whose decoder moved.
    let dir = d.path().join("rl");
    run_rl(&cfg, &dir);
    let log = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(
        log.contains("4 of 4 prompts show it their screenshot"),
        "{log}"
    );
    let ck = dir.join("checkpoints/step-2");
    assert!(is_vl_folder(&ck), "the RL checkpoint is a Qwen3-VL folder");
    assert!(ck.join("preprocessor_config.json").is_file());
    let before = Qwen3Vl::load_dir(&init, DType::F32, &Device::Cpu)
        .unwrap()
        .named_weights()
        .unwrap();
    let after = Qwen3Vl::load_dir(&ck, DType::F32, &Device::Cpu)
        .unwrap()
        .named_weights()
        .unwrap();
    assert_eq!(before.len(), after.len());
    let diff = |n: &str| max_abs_diff(&before[n], &after[n]);
    for n in before.keys().filter(|n| n.starts_with("model.visual.")) {
        assert_eq!(diff(n), 0.0, "{n}: the tower changed");
    }
    let q = "model.language_model.layers.0.self_attn.q_proj.weight";
    assert!(diff(q) > 0.0, "{q}: RL left the decoder as it was");
    // The local policy loads it as a model that sees.
    let loaded = rmsweb::model::LocalModelPolicy::from_checkpoint(&ck, &Device::Cpu).unwrap();
    assert!(loaded.vl.is_some());
}

/// RL from a `qwen3-vl-lora` SFT checkpoint: the checkpoint is one PEFT adapter (SFT +
/// RL) under Qwen3-VL module names on the original base, with the SFT run's
/// screenshot setting, and the local policy loading it scores as the trained policy.
#[test]
fn rl_from_a_qwen3_vl_lora_sft_run_checkpoints_one_adapter_under_vl_names() {
    use rmsweb::train::sft::{self, SftConfig};
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    coloured_dataset(&ds, 4);
    train("tiny-vl", &ds, &d.path().join("base-run"), 10);
    let base = d.path().join("base-run/checkpoints/step-10");
    let sets: Vec<String> = [
        "lora.r=4",
        "lora.alpha=8.0",
        "max_pixels=4096",
        "micro_batch=4",
        "context=128",
        "lr=0.01",
        "epochs=20",
        "max_steps=4",
        "checkpoint_every=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let scfg = SftConfig::preset("qwen3-vl-lora", &ds, Some(&base))
        .unwrap()
        .with_overrides(&sets)
        .unwrap();
    let sft_run = d.path().join("sft");
    sft::train(
        &scfg,
        &RunDir::open(&sft_run).unwrap(),
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |_| {},
    )
    .unwrap();
    let mut cfg = vl_rl_config(&ds, &sft_run);
    cfg.steps = 1;
    let dir = d.path().join("rl");
    run_rl(&cfg, &dir);
    let ck = dir.join("checkpoints/step-1");
    assert!(!ck.join("config.json").exists(), "an adapter checkpoint");
    let ac: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ck.join("adapter/adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ac["r"], 8, "SFT rank 4 + RL rank 4");
    assert_eq!(
        Path::new(ac["base_model_name_or_path"].as_str().unwrap()),
        std::fs::canonicalize(&base).unwrap()
    );
    let names = rmsweb::model::weights::load_file(
        &ck.join("adapter/adapter_model.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    assert!(
        names
            .keys()
            .all(|n| n.starts_with("base_model.model.model.language_model.layers.")),
        "{:?}",
        names.keys().take(3).collect::<Vec<_>>()
    );
    let image =
        rmsweb::model::vl::VlImageConfig::from_file(ck.join("preprocessor_config.json")).unwrap();
    assert_eq!(image.max_pixels, 4096, "the SFT run's screenshot cap");

    // The loaded checkpoint scores a response with the screenshot as the trained
    // policy does.
    let loaded = rmsweb::model::LocalModelPolicy::from_checkpoint(&ck, &Device::Cpu).unwrap();
    let seen = loaded.vl.as_deref().expect("a VL policy");
    let policy = load_policy(&cfg).unwrap();
    let trained =
        rmsweb::model::weights::load_file(&ck.join("trainable.safetensors"), &Device::Cpu).unwrap();
    rmsweb::train::rl::checkpoint::load_adapters(policy.model(), &trained).unwrap();
    let (ps, _) = prompts::load(&Dataset::open(&ds).unwrap(), PromptSource::FullCorpus).unwrap();
    let prompt = encode_prompt(&policy, &ps[1], 4096).unwrap();
    let shot = Screenshot::load(ps[1].screenshot.as_ref().unwrap(), &image, &Device::Cpu).unwrap();
    let resp = loaded
        .tokenizer
        .encode("click(2)", false)
        .unwrap()
        .get_ids()
        .to_vec();
    let seq = TrainSeq::rl(&prompt, &resp).seeing(Some(SeenImage(Arc::new(shot))));
    let score = |s| token_logps(s, &[&seq], 1.0, false).unwrap().logp;
    let a = score((&seen.model).into());
    let b = score(policy.scorer());
    let diff = max_abs_diff(&a, &b);
    assert!(diff < 1e-3, "max |Δ log p| = {diff}");
    policy.model().set_adapters_enabled(false);
    let moved = max_abs_diff(&score(policy.scorer()), &b);
    assert!(moved > 1e-6, "the RL adapter left the policy as it was");
}
