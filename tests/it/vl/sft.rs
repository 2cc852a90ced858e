//! `train sft --preset tiny-vl`: a Qwen3-VL model trained from scratch on screenshot +
//! DOM prompts. The test data makes the answer depend on the screenshot alone (its
//! colour names the button to click; instruction and DOM are the same everywhere), so
//! only a model that sees the image can drive the loss below the text model's floor.

use candle_core::{DType, Device};
use rmsweb::action::Action;
use rmsweb::model::vl::{Qwen3Vl, VlConfig, VlImageConfig};
use rmsweb::train::run::RunDir;
use rmsweb::train::sft::{self, SftConfig};
use rmsweb::trajectory::{Dataset, ModelOutput, Outcome, State, Step, Task, Trajectory};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

const COLOURS: [[u8; 3]; 4] = [[230, 30, 30], [30, 200, 30], [30, 30, 230], [240, 240, 240]];

/// `n` one-step successes: the same instruction and buttons, a 64x64 screenshot of
/// one colour, and a click on the button that colour stands for.
pub(crate) fn coloured_dataset(root: &Path, n: usize) {
    let mut ds = Dataset::create(root, "vl-test", "synthetic").unwrap();
    let dom: String = ["Red", "Green", "Blue", "White"]
        .iter()
        .enumerate()
        .map(|(k, w)| format!("[{}]<button>{w}</button>\n", k + 1))
        .collect();
    let (mut tasks, mut trajs) = (Vec::new(), Vec::new());
    for i in 0..n {
        let k = i % COLOURS.len();
        let id = format!("traj{i}");
        let rel = format!("screenshots/{id}/0.png");
        let path = root.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        image::RgbImage::from_pixel(64, 64, image::Rgb(COLOURS[k]))
            .save(&path)
            .unwrap();
        tasks.push(Task {
            task_id: format!("t{i}"),
            website: "example.test".into(),
            domain: "test".into(),
            category: "click".into(),
            instruction: "Click the button of the screen's colour".into(),
            source: "synthetic".into(),
        });
        trajs.push(Trajectory {
            id,
            task_id: format!("t{i}"),
            attempt: 1,
            round: 1,
            reflection: None,
            source: "test".into(),
            teacher: "test".into(),
            outcome: Outcome {
                success: true,
                ..Default::default()
            },
            steps: vec![Step {
                index: 0,
                state: State {
                    url: "http://example.test/".into(),
                    title: "Colours".into(),
                    dom_text: dom.clone(),
                    screenshot: Some(rel),
                    ..Default::default()
                },
                output: ModelOutput {
                    actions: vec![Action::new("click", json!({"index": k + 1}))],
                    ..Default::default()
                },
                ..Default::default()
            }],
        });
    }
    ds.append_tasks(&tasks).unwrap();
    ds.append_trajectories(&trajs).unwrap();
    // One-step successes are kept (as the recipe's MiniWoB filter keeps them).
    let rule = rmsweb::curate::filter::FilterConfig {
        min_effective_steps: 1,
        ..Default::default()
    };
    let report = rmsweb::curate::filter_dataset(&ds, &rule);
    assert_eq!(report.kept.len(), n);
    let file = root.join(rmsweb::curate::FILTER_FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, serde_json::to_string(&report).unwrap()).unwrap();
}

fn overrides(steps: usize) -> Vec<String> {
    [
        "tiny.vocab_size=400",
        "tiny.hidden_size=32",
        "tiny.num_hidden_layers=2",
        "tiny.num_attention_heads=4",
        "tiny.num_key_value_heads=2",
        "tiny.head_dim=8",
        "tiny.intermediate_size=64",
        "vision.hidden_size=32",
        "vision.intermediate_size=64",
        "vision.num_heads=2",
        "vision.num_position_embeddings=16",
        "vision.mrope_section=[2, 1, 1]",
        "vision.min_pixels=4096",
        "micro_batch=4",
        "grad_accum=2",
        "context=128",
        "lr=0.01",
        "warmup_ratio=0.1",
        "epochs=200",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("max_steps={steps}"), "checkpoint_every=0".into()])
    .collect()
}

/// Trains `preset` on `ds` into `run`; returns the mean loss of the last 10 steps.
pub(crate) fn train(preset: &str, ds: &Path, run: &Path, steps: usize) -> f64 {
    let mut sets = overrides(steps);
    if preset == "tiny" {
        sets.retain(|s| !s.starts_with("vision."));
    }
    let cfg = SftConfig::preset(preset, ds, None)
        .unwrap()
        .with_overrides(&sets)
        .unwrap();
    let mut losses = Vec::new();
    let t0 = std::time::Instant::now();
    let out = sft::train(
        &cfg,
        &RunDir::open(run).unwrap(),
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |r| losses.push(r.loss),
    )
    .unwrap();
    assert_eq!(out, sft::Outcome::Finished);
    eprintln!(
        "{preset}: {steps} steps in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    losses[losses.len() - 10..].iter().sum::<f64>() / 10.0
}

#[test]
fn tiny_vl_sft_learns_what_only_the_screenshot_shows() {
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    coloured_dataset(&ds, 8);
    let steps = 160;
    let text = train("tiny", &ds, &d.path().join("text"), steps);
    let run = d.path().join("vl");
    let vl = train("tiny-vl", &ds, &run, steps);
    eprintln!("last-10 loss: text-only {text:.4}, tiny-vl {vl:.4}");

    assert!(
        vl < 0.7 * text,
        "the VL model does not use the screenshot (loss {vl} vs text-only {text})"
    );
    let log = std::fs::read_to_string(run.join("stdout.log")).unwrap_or_default();
    assert!(log.contains("8 with a screenshot"), "{log}");

    // The checkpoint is an HF Qwen3-VL folder with its tokenizer and image processor.
    let ckpt = run.join(format!("checkpoints/step-{steps}"));
    let cfg = VlConfig::from_file(&ckpt.join("config.json")).unwrap();
    assert_eq!(cfg.vision.hidden_size, 32);
    let tok = rmsweb::model::tokenizer::load(ckpt.join("tokenizer.json")).unwrap();
    assert_eq!(
        tok.token_to_id("<|image_pad|>"),
        Some(cfg.ids.image_token_id)
    );
    let image = VlImageConfig::from_file(ckpt.join("preprocessor_config.json")).unwrap();
    assert_eq!((image.patch_size, image.merge_size), (16, 2));
    let model = Qwen3Vl::load_dir(&ckpt, DType::F32, &Device::Cpu).unwrap();
    assert_eq!(model.config(), cfg);
}

/// The local policy on a tiny-vl checkpoint sees the screenshot: greedy decoding with
/// the image (KV cache, image tokens expanded, the tower run once on the prompt) gives
/// the tokens a full forward pass picks at every step, and another screenshot another
/// distribution over the first token.
#[test]
fn local_policy_decodes_a_vl_checkpoint_with_its_screenshot() {
    use rmsweb::model::chat_template::Message;
    use rmsweb::model::vl::prompt::{Screenshot, expand_ids, with_screenshot};
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    coloured_dataset(&ds, 4);
    let run = d.path().join("vl");
    train("tiny-vl", &ds, &run, 12);
    let ckpt = run.join("checkpoints/step-12");
    let mut policy = rmsweb::model::LocalModelPolicy::from_checkpoint(&ckpt, &Device::Cpu).unwrap();
    policy.sampling.max_new_tokens = 8;
    let vl = policy
        .vl
        .as_deref()
        .expect("a VL checkpoint loads its tower");
    let msgs = [
        Message::new("system", "You click buttons."),
        Message::new("user", "Click the button of the screen's colour"),
    ];
    let shot = |k: usize| ds.join(format!("screenshots/traj{k}/0.png"));
    let ours = policy.generate_seeing(&msgs, Some(&shot(0)), None).unwrap();

    // The same greedy decode by full forward passes.
    let prompt = policy
        .template
        .encode_prompt(&policy.tokenizer, &with_screenshot(&msgs))
        .unwrap();
    let first = Screenshot::load(&shot(0), &vl.image, &Device::Cpu).unwrap();
    let image_token = vl.model.token_ids().image_token_id;
    let mut ids = expand_ids(&prompt, image_token, &[first.tokens]).unwrap();
    let images = first.images();
    let last_logits = |ids: &[u32]| -> Vec<f32> {
        let l = vl.model.forward(ids, Some(images), None).unwrap();
        let n = l.dim(1).unwrap();
        l.narrow(1, n - 1, 1)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    };
    let start = ids.len();
    for _ in 0..8 {
        let logits = last_logits(&ids);
        let next = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap() as u32;
        if policy.stop_ids().contains(&next) {
            break;
        }
        ids.push(next);
    }
    let full = policy.tokenizer.decode(&ids[start..], true).unwrap();
    assert_eq!(
        ours, full,
        "cached decoding with the image equals full forwards"
    );

    // The screenshot reaches the logits.
    let other = Screenshot::load(&shot(2), &vl.image, &Device::Cpu).unwrap();
    let l2 = vl
        .model
        .forward(&ids[..start], Some(other.images()), None)
        .unwrap();
    let l1 = vl.model.forward(&ids[..start], Some(images), None).unwrap();
    let diff = crate::hf::max_abs_diff(&l1, &l2);
    assert!(
        diff > 1e-4,
        "another screenshot leaves the logits as they were ({diff})"
    );
}

/// `train sft --preset qwen3-vl-lora` on a Qwen3-VL folder (here a tiny-vl checkpoint
/// standing in for an HF one): the adapters learn while the base stays as it was, the
/// checkpoint holds a PEFT adapter under Qwen3-VL module names and the preset's
/// screenshot cap, and the local policy loads base + adapter, merged, with that cap.
#[test]
fn qwen3_vl_lora_trains_adapters_that_the_local_policy_loads() {
    use rmsweb::model::vl::prompt::{Screenshot, expand_ids, with_screenshot};
    use rmsweb::model::{LocalModelPolicy, chat_template::Message, weights};
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("ds");
    coloured_dataset(&ds, 8);
    train("tiny-vl", &ds, &d.path().join("base-run"), 10);
    let base = d.path().join("base-run/checkpoints/step-10");
    let base_weights = std::fs::read(base.join("model.safetensors")).unwrap();

    // The preset wants a Qwen3-VL folder.
    let err = SftConfig::preset("qwen3-vl-lora", &ds, None).unwrap_err();
    assert!(format!("{err:#}").contains("needs --model DIR"), "{err:#}");
    let text_run = d.path().join("text-run");
    train("tiny", &ds, &text_run, 10);
    let err = SftConfig::preset(
        "qwen3-vl-lora",
        &ds,
        Some(&text_run.join("checkpoints/step-10")),
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("not a Qwen3-VL model"),
        "{err:#}"
    );

    let cfg = SftConfig::preset("qwen3-vl-lora", &ds, Some(&base)).unwrap();
    assert_eq!(cfg.max_pixels, Some(262_144), "the paper's screenshot cap");
    let lora = cfg.lora.clone().unwrap();
    assert_eq!((lora.r, lora.alpha), (64, 128.0));
    let steps = 40;
    let sets: Vec<String> = [
        "lora.r=4",
        "lora.alpha=8.0",
        "max_pixels=4096",
        "micro_batch=4",
        "grad_accum=2",
        "context=128",
        "lr=0.01",
        "warmup_ratio=0.0",
        "epochs=200",
        "checkpoint_every=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("max_steps={steps}")])
    .collect();
    let cfg = cfg.with_overrides(&sets).unwrap();
    let run = d.path().join("lora-run");
    let mut losses = Vec::new();
    let out = sft::train(
        &cfg,
        &RunDir::open(&run).unwrap(),
        false,
        Arc::new(AtomicBool::new(false)),
        &mut |r| losses.push(r.loss),
    )
    .unwrap();
    assert_eq!(out, sft::Outcome::Finished);
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let (first, last) = (mean(&losses[..5]), mean(&losses[losses.len() - 5..]));
    // On a base this small (random embeddings, 32 wide) the adapters learn slowly:
    // the loss falls by ~0.1 nat over these 40 full-batch steps (the same as
    // qwen3-lora on the text model of the same size).
    assert!(
        last < first - 0.05,
        "the adapters do not learn: {first} -> {last}"
    );
    let log = std::fs::read_to_string(run.join("stdout.log")).unwrap();
    assert!(log.contains("8 with a screenshot"), "{log}");
    assert_eq!(
        std::fs::read(base.join("model.safetensors")).unwrap(),
        base_weights,
        "training adapters changed the base folder"
    );

    // The checkpoint: a PEFT adapter under Qwen3-VL names, and the screenshot cap.
    let ckpt = run.join(format!("checkpoints/step-{steps}"));
    assert!(
        !ckpt.join("config.json").exists(),
        "an adapter checkpoint, not a model"
    );
    let adapter = weights::load_file(
        &ckpt.join("adapter/adapter_model.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    assert!(!adapter.is_empty());
    for name in adapter.keys() {
        assert!(
            name.starts_with("base_model.model.model.language_model.layers."),
            "{name}"
        );
    }
    let image = VlImageConfig::from_file(ckpt.join("preprocessor_config.json")).unwrap();
    assert_eq!(image.max_pixels, 4096);

    // The local policy: base + adapter merged, the checkpoint's cap.
    let policy = LocalModelPolicy::from_checkpoint(&ckpt, &Device::Cpu).unwrap();
    let vl = policy.vl.as_deref().expect("a VL policy");
    assert_eq!(vl.image.max_pixels, 4096);
    let msgs = [
        Message::new("system", "You click buttons."),
        Message::new("user", "Click the button of the screen's colour"),
    ];
    let prompt = policy
        .template
        .encode_prompt(&policy.tokenizer, &with_screenshot(&msgs))
        .unwrap();
    let shot =
        Screenshot::load(&ds.join("screenshots/traj1/0.png"), &vl.image, &Device::Cpu).unwrap();
    let image_token = vl.model.token_ids().image_token_id;
    let ids = expand_ids(&prompt, image_token, &[shot.tokens]).unwrap();
    let merged = vl.model.forward(&ids, Some(shot.images()), None).unwrap();
    let mut unmerged = Qwen3Vl::load_dir(&base, DType::F32, &Device::Cpu).unwrap();
    let plain = unmerged.forward(&ids, Some(shot.images()), None).unwrap();
    unmerged
        .attach_adapter(&ckpt.join("adapter"), &Device::Cpu)
        .unwrap();
    let attached = unmerged.forward(&ids, Some(shot.images()), None).unwrap();
    let diff = crate::hf::max_abs_diff(&merged, &attached);
    assert!(diff < 1e-4, "merged vs attached adapter: {diff}");
    let moved = crate::hf::max_abs_diff(&merged, &plain);
    assert!(
        moved > 1e-3,
        "the policy runs without its adapter ({moved})"
    );

    // `model merge`: one Qwen3-VL folder, the adapter folded in, the checkpoint's cap.
    let out = d.path().join("merged");
    let s = rmsweb::model::merge::merged_export(&ckpt, &out).unwrap();
    assert!(s.vision && s.lora.r == 4);
    let exported = LocalModelPolicy::load(&out, None, &Device::Cpu).unwrap();
    let evl = exported.vl.as_deref().expect("a VL folder");
    assert_eq!(evl.image.max_pixels, 4096);
    let logits = evl.model.forward(&ids, Some(shot.images()), None).unwrap();
    let diff = crate::hf::max_abs_diff(&logits, &merged);
    assert!(diff < 1e-4, "merged export vs merged policy: {diff}");
    // A whole model folder has nothing to merge; --out is left as it was.
    let e = rmsweb::model::merge::merged_export(&base, &d.path().join("m2")).unwrap_err();
    assert!(
        format!("{e:#}").contains("whole model folder already"),
        "{e:#}"
    );
    assert!(!d.path().join("m2").exists());
}
