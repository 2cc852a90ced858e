//! The search for the shortest way to close a grounded answer
//! (`Matcher::shortest_completion`), which constrained decoding runs every few tokens
//! once an answer nears its token budget: from the start of an answer, from inside
//! its free text, and from inside its action.
//! The same from three prefixes of an answer under Browser Use 0.13's `AgentOutput`
//! schema (seven required keys, 24 kinds of action), which `rmsweb serve` enforces.
//! Then the `Closer` over a whole answer that babbles in its `thinking` until the
//! close is due (one call every 4 tokens from 160 left).
//! Run: `cargo bench --bench close` (prints the milliseconds per search of each
//! prefix, in thread CPU time, with the completion found, and per babbling answer);
//! under `cargo test` it searches from each prefix once and checks the completion
//! closes the answer, and closes the babbling answer once.

use criterion::{Criterion, criterion_group};
use rmsweb::model::constrain::{Closer, Matcher, Schema};
use rmsweb::policy::grounding::answer_schema;
use rmsweb::trajectory::Element;
use std::hint::black_box;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::best_cpu_seconds;

/// A login page's grounded schema (two fields, a button, two typed values).
fn schema() -> std::sync::Arc<Schema> {
    let e = |index: u32, tag: &str, text: &str| Element {
        index,
        tag: tag.into(),
        text: text.into(),
        ..Default::default()
    };
    let elements = [
        e(3, "input", ""),
        e(5, "input", ""),
        e(7, "button", "Login"),
    ];
    let instruction = "Enter the username \"kanesha\" and the password \"Zx9q\" into the text fields and press login.";
    Schema::compile(&answer_schema(instruction, &[3, 5, 7], &elements)).expect("schema")
}

/// Browser Use 0.13's `AgentOutput` schema, as recorded in `tests/data`.
fn agent_output_schema() -> std::sync::Arc<Schema> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/browser_use/agent_output_schema.json"
    );
    let text = std::fs::read_to_string(path).expect(path);
    Schema::compile(&serde_json::from_str(&text).expect(path)).expect("schema")
}

/// The prefixes searched from, each with the matcher after it and the longest
/// completion searched for.
fn prefixes() -> Vec<(&'static str, Matcher, usize)> {
    let login = schema();
    let agent = agent_output_schema();
    let babble = "executed ".repeat(40);
    let cases: [(&'static str, &std::sync::Arc<Schema>, String); 7] = [
        ("start", &login, String::new()),
        ("in_thinking", &login, format!("{{\"thinking\": \"{babble}")),
        (
            "in_memory",
            &login,
            format!("{{\"evaluation_previous_goal\": \"{babble}\", \"memory\": \"{babble}"),
        ),
        (
            "in_action",
            &login,
            "{\"evaluation_previous_goal\": \"\", \"memory\": \"\", \"next_goal\": \"log in\", \"action\": [{\"input\": {\"index\": 3, \"text\": \"kan".into(),
        ),
        ("bu_start", &agent, String::new()),
        ("bu_in_thinking", &agent, format!("{{\"thinking\": \"{babble}")),
        (
            "bu_in_action_key",
            &agent,
            "{\"thinking\": null, \"memory\": \"on the results page\", \"action\": [{\"in".into(),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, schema, text)| {
            let mut m = schema.matcher();
            assert!(m.advance(text.as_bytes()), "{name}: outside the schema");
            let bound = if name.starts_with("bu_") { 4096 } else { 400 };
            (name, m, bound)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("close");
    g.sample_size(10);
    for (name, m, bound) in prefixes() {
        g.bench_function(name, |b| {
            b.iter(|| black_box(black_box(&m).shortest_completion(bound)))
        });
    }
    g.finish();
}

/// Prints the CPU milliseconds of one search from each prefix (best of 5).
fn milliseconds_per_search() {
    for (name, m, bound) in prefixes() {
        let (best, rest) = best_cpu_seconds(5, || black_box(m.shortest_completion(bound)));
        let rest = rest.unwrap_or_default();
        println!(
            "close {name:>12}: {:>7.2} ms, {} bytes: {}",
            best * 1e3,
            rest.len(),
            String::from_utf8_lossy(&rest)
        );
    }
}

/// A byte-level vocabulary: every byte is a token.
fn byte_tokens() -> Vec<Option<Vec<u8>>> {
    (0..=255u8).map(|b| Some(vec![b])).collect()
}

/// The decoding loop's closer over one answer that babbles in its `thinking` until
/// its budget runs out: 160 tokens left at the first search, one search every 4
/// tokens (4 bytes of babble each) until the close is due; returns the searches run.
fn close_babbling_answer(schema: &std::sync::Arc<Schema>, tokens: &[Option<Vec<u8>>]) -> usize {
    let mut closer = Closer::default();
    let mut text = String::from("{\"thinking\": \"");
    let mut room = 160;
    let mut searches = 0;
    loop {
        let mut m = schema.matcher();
        assert!(m.advance(text.as_bytes()));
        searches += 1;
        if let Some(ids) = closer.due(&m, room, false, tokens) {
            let rest: Vec<u8> = ids
                .iter()
                .flat_map(|&i| tokens[i as usize].clone().unwrap())
                .collect();
            assert!(
                m.advance(&rest) && m.can_finish(),
                "the close ends the answer"
            );
            return searches;
        }
        text.push_str("exe ");
        room -= 4;
    }
}

/// Prints the CPU milliseconds of the closer over a whole babbling answer (best of 3).
fn milliseconds_per_answer() {
    let schema = schema();
    let tokens = byte_tokens();
    let (best, searches) =
        best_cpu_seconds(3, || black_box(close_babbling_answer(&schema, &tokens)));
    println!(
        "closer over a babbling answer: {:>7.2} ms, {searches} calls",
        best * 1e3
    );
}

criterion_group!(benches, bench);

fn main() {
    if std::env::args().any(|a| a == "--bench") {
        benches();
        Criterion::default().configure_from_args().final_summary();
        milliseconds_per_search();
        milliseconds_per_answer();
    } else {
        // `cargo test --all-targets`: each search once; what it finds closes the answer.
        for (name, mut m, bound) in prefixes() {
            let rest = m.shortest_completion(bound).expect(name);
            assert!(m.advance(&rest) && m.can_finish(), "{name}");
        }
        close_babbling_answer(&schema(), &byte_tokens());
    }
}
