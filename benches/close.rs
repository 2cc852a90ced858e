//! The search for the shortest way to close a grounded answer
//! (`Matcher::shortest_completion`), which constrained decoding runs every few tokens
//! once an answer nears its token budget: from the start of an answer, from inside
//! its free text, and from inside its action.
//! Run: `cargo bench --bench close` (prints the milliseconds per search of each
//! prefix, in thread CPU time, with the completion found); under `cargo test` it
//! searches from each prefix once and checks the completion closes the answer.

use criterion::{Criterion, criterion_group};
use rmsweb::model::constrain::{Matcher, Schema};
use rmsweb::policy::grounding::answer_schema;
use rmsweb::trajectory::Element;
use std::hint::black_box;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::thread_cpu_seconds;

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

/// The prefixes searched from, each with the matcher after it.
fn prefixes(schema: &std::sync::Arc<Schema>) -> Vec<(&'static str, Matcher)> {
    let babble = "executed ".repeat(40);
    let cases: [(&'static str, String); 4] = [
        ("start", String::new()),
        ("in_thinking", format!("{{\"thinking\": \"{babble}")),
        (
            "in_memory",
            format!("{{\"evaluation_previous_goal\": \"{babble}\", \"memory\": \"{babble}"),
        ),
        (
            "in_action",
            "{\"evaluation_previous_goal\": \"\", \"memory\": \"\", \"next_goal\": \"log in\", \"action\": [{\"input\": {\"index\": 3, \"text\": \"kan".into(),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, text)| {
            let mut m = schema.matcher();
            assert!(m.advance(text.as_bytes()), "{name}: outside the schema");
            (name, m)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let schema = schema();
    let mut g = c.benchmark_group("close");
    g.sample_size(10);
    for (name, m) in prefixes(&schema) {
        g.bench_function(name, |b| {
            b.iter(|| black_box(black_box(&m).shortest_completion(400)))
        });
    }
    g.finish();
}

/// Prints the CPU milliseconds of one search from each prefix (best of 5).
fn milliseconds_per_search() {
    let schema = schema();
    for (name, m) in prefixes(&schema) {
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let start = thread_cpu_seconds();
            black_box(m.shortest_completion(400));
            best = best.min(thread_cpu_seconds() - start);
        }
        let rest = m.shortest_completion(400).unwrap_or_default();
        println!(
            "close {name:>12}: {:>7.2} ms, {} bytes: {}",
            best * 1e3,
            rest.len(),
            String::from_utf8_lossy(&rest)
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    if std::env::args().any(|a| a == "--bench") {
        benches();
        Criterion::default().configure_from_args().final_summary();
        milliseconds_per_search();
    } else {
        // `cargo test --all-targets`: each search once; what it finds closes the answer.
        let schema = schema();
        for (name, mut m) in prefixes(&schema) {
            let rest = m.shortest_completion(400).expect(name);
            assert!(m.advance(&rest) && m.can_finish(), "{name}");
        }
    }
}
