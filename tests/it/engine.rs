//! The continuous-batching engine on a tiny random model: sequences that join a
//! running batch at different steps, with prompts shorter and longer than it, decode
//! exactly what each decodes alone; the batch turns back when it reaches the end of
//! the model's positions; a request whose receiver is dropped leaves without
//! disturbing the others; repeated prompts reuse their cached prefix.

use super::serve::write_tiny_checkpoint;
use rmsweb::model::LocalModelPolicy;
use rmsweb::model::engine::{Engine, EngineOptions, Event, Finish, GenRequest};
use rmsweb::model::sample::{SampleConfig, generate};
use std::path::Path;
use tokio::sync::mpsc::UnboundedReceiver;

fn load(dir: &Path) -> LocalModelPolicy {
    LocalModelPolicy::from_checkpoint(dir, &candle_core::Device::Cpu).unwrap()
}

fn start(dir: &Path, prefix_positions: usize) -> Engine {
    let opts = EngineOptions {
        max_batch: 16,
        prefix_positions,
    };
    Engine::over(load(dir), opts).0
}

/// A prompt of `len` tokens that differs with `salt`.
fn prompt(len: usize, salt: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| 3 + (i * 7 + salt * 13) % 250)
        .collect()
}

/// What greedy decoding of `prompt` alone gives, as text.
fn alone(p: &LocalModelPolicy, prompt: &[u32], max_new: usize) -> String {
    let cfg = SampleConfig {
        max_new_tokens: max_new,
        ..SampleConfig::default()
    };
    let ids = generate(&p.model, prompt, p.stop_ids(), &cfg).unwrap();
    p.tokenizer.decode(&ids, true).unwrap()
}

/// Reads events until the first one arrives (the request is running).
fn first(rx: &mut UnboundedReceiver<Event>, text: &mut String) -> bool {
    match rx.blocking_recv() {
        Some(Event::Delta { text: t, .. }) => {
            text.push_str(&t);
            false
        }
        Some(Event::Finished { .. }) => true,
        other => panic!("unexpected {other:?}"),
    }
}

/// The whole text of a one-sequence request.
fn rest(rx: &mut UnboundedReceiver<Event>, mut text: String, done: bool) -> (String, Finish) {
    if done {
        return (text, Finish::Stop);
    }
    loop {
        match rx.blocking_recv() {
            Some(Event::Delta { text: t, .. }) => text.push_str(&t),
            Some(Event::Finished { finish, .. }) => return (text, finish),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn sequences_joining_a_running_batch_decode_what_they_decode_alone() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_checkpoint(dir.path(), 256, &[]);
    let reference = load(dir.path());
    let engine = start(dir.path(), 4096);
    // A runs; B (longer than the batch), C (shorter) join it; D joins later.
    let specs = [(20, 1, 40), (70, 2, 30), (6, 3, 25), (33, 4, 20)];
    let prompts: Vec<Vec<u32>> = specs.iter().map(|&(l, s, _)| prompt(l, s)).collect();
    let req = |i: usize| GenRequest::greedy(prompts[i].clone(), specs[i].2);
    let mut a = engine.submit(req(0));
    let mut ta = String::new();
    let da = first(&mut a, &mut ta);
    let mut b = engine.submit(req(1));
    let mut c = engine.submit(req(2));
    let mut tb = String::new();
    let db = first(&mut b, &mut tb);
    let mut d = engine.submit(req(3));
    let got = [
        rest(&mut a, ta, da).0,
        rest(&mut b, tb, db).0,
        rest(&mut c, String::new(), false).0,
        rest(&mut d, String::new(), false).0,
    ];
    for (i, g) in got.iter().enumerate() {
        let want = alone(&reference, &prompts[i], specs[i].2);
        assert!(!want.is_empty());
        assert_eq!(g, &want, "sequence {i}");
    }
}

#[test]
fn a_batch_reaching_the_last_position_turns_back_and_decodes_on() {
    // 96 positions: A's 30 prompt tokens and 60 new ones fit, but B (70 tokens)
    // joins when A is at position ~32, moving the batch's end to 70: the next 26
    // positions would pass the table, so the batch turns back.
    let dir = tempfile::tempdir().unwrap();
    write_tiny_checkpoint(dir.path(), 96, &[]);
    let reference = load(dir.path());
    let engine = start(dir.path(), 0);
    let pa = prompt(30, 5);
    let pb = prompt(70, 6);
    let mut a = engine.submit(GenRequest::greedy(pa.clone(), 60));
    let mut ta = String::new();
    let mut da = first(&mut a, &mut ta);
    for _ in 0..2 {
        if !da {
            da = first(&mut a, &mut ta);
        }
    }
    let mut b = engine.submit(GenRequest::greedy(pb.clone(), 20));
    let (ga, _) = rest(&mut a, ta, da);
    let (gb, _) = rest(&mut b, String::new(), false);
    assert_eq!(ga, alone(&reference, &pa, 60));
    assert_eq!(gb, alone(&reference, &pb, 20));
}

#[test]
fn a_dropped_request_leaves_the_batch_and_the_others_decode_on() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_checkpoint(dir.path(), 256, &[]);
    let reference = load(dir.path());
    let engine = start(dir.path(), 4096);
    let pa = prompt(12, 7);
    let pb = prompt(40, 8);
    let mut a = engine.submit(GenRequest::greedy(pa.clone(), 50));
    let b = engine.submit(GenRequest::greedy(pb, 200));
    let mut ta = String::new();
    let da = first(&mut a, &mut ta);
    drop(b);
    let (ga, _) = rest(&mut a, ta, da);
    assert_eq!(ga, alone(&reference, &pa, 50));
    // The engine still answers (the dropped row did not wedge it).
    let c = engine.generate(GenRequest::greedy(pa.clone(), 5)).unwrap();
    assert_eq!(c.len(), 1);
    assert!(c[0].tokens <= 5);
}

#[test]
fn prompts_sharing_a_prefix_reuse_its_keys_and_decode_the_same() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_checkpoint(dir.path(), 256, &[]);
    let reference = load(dir.path());
    let engine = start(dir.path(), 4096);
    let base = prompt(50, 9);
    let mut longer = base.clone();
    longer.extend(prompt(9, 10));
    let mut other_end = base[..45].to_vec();
    other_end.extend(prompt(4, 11));
    for p in [&base, &base, &longer, &other_end] {
        let got = engine.generate(GenRequest::greedy(p.clone(), 30)).unwrap();
        assert_eq!(got[0].text, alone(&reference, p, 30));
    }
}

#[test]
fn n_samples_of_one_request_share_its_prompt_and_follow_their_seeds() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_checkpoint(dir.path(), 256, &[]);
    let engine = start(dir.path(), 4096);
    let mut req = GenRequest::greedy(prompt(25, 12), 30);
    req.n = 4;
    req.temperature = 1.0;
    req.seed = 99;
    let one = engine.generate(req.clone()).unwrap();
    // The same request again, now joining a batch where another runs: same samples.
    let other = engine.submit(GenRequest::greedy(prompt(60, 13), 100));
    let two = engine.generate(req).unwrap();
    drop(other);
    assert_eq!(one.len(), 4);
    assert_eq!(one, two);
    let distinct: std::collections::BTreeSet<&str> = one.iter().map(|c| c.text.as_str()).collect();
    assert!(
        distinct.len() > 1,
        "four samples at temperature 1 all alike: {one:?}"
    );
}
