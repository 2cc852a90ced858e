//! The action parser on hostile candidates: 1 MiB of `{`, of `click(`, of unclosed
//! nested objects, calls and strings, against a normal response. The parser's work is
//! bounded by a budget linear in the input, so each of these takes a few milliseconds.
//! Run: `cargo bench --bench parse` (prints the milliseconds per parse of each input,
//! in thread CPU time); under `cargo test` it parses each input once.

use criterion::{Criterion, Throughput, criterion_group};
use rmsweb::action::parse::{MAX_RESPONSE_BYTES, parse_response};
use std::hint::black_box;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::best_cpu_seconds;

/// Repeats `unit` until the text is `len` bytes (cut on a char boundary).
fn fill(unit: &str, len: usize) -> String {
    let mut s = unit.repeat(len / unit.len() + 1);
    let mut cut = len.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

/// The hostile inputs, each as large as the parser accepts (1 MiB).
fn inputs() -> Vec<(&'static str, String)> {
    let n = MAX_RESPONSE_BYTES;
    let normal = r#"{"thinking": "The results page is loaded.", "memory": "page 1 checked", "next_goal": "open the next page", "action": [{"click": {"index": 13}}]}"#;
    vec![
        ("open_braces", fill("{", n)),
        ("click_calls", fill("click(", n)),
        ("nested_keys", fill(r#"{"a":"#, n)),
        ("key_strings", fill(r#"{"{"#, n)),
        ("bracket_args", fill("click({", n)),
        ("string_args", fill(r#"input(1, ""#, n)),
        ("quote_args", fill("input(1, '", n)),
        ("action_words", fill(r#"{"action": ["#, n)),
        ("prose_then_action", {
            let mut s = fill("I think {maybe} click(the button) ", n - normal.len());
            s.push_str(normal);
            s
        }),
        ("normal", normal.to_string()),
    ]
}

fn bench(c: &mut Criterion) {
    let inputs = inputs();
    let mut g = c.benchmark_group("parse");
    g.sample_size(10);
    for (name, text) in &inputs {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| {
                let _ = black_box(parse_response(black_box(text)));
            })
        });
    }
    g.finish();
}

/// Prints the CPU milliseconds of one parse of each input (best of 5).
fn milliseconds_per_parse() {
    for (name, text) in inputs() {
        let (best, r) = best_cpu_seconds(5, || black_box(parse_response(black_box(&text))));
        black_box(r.is_ok());
        let outcome = match parse_response(&text) {
            Ok(p) => format!("{} action(s)", p.actions.len()),
            Err(e) => {
                let m = e.message;
                m.chars().take(60).collect::<String>()
            }
        };
        println!(
            "parse {name:>18}: {:>8} bytes in {:>7.2} ms  ({outcome})",
            text.len(),
            best * 1e3
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    if std::env::args().any(|a| a == "--bench") {
        benches();
        Criterion::default().configure_from_args().final_summary();
        milliseconds_per_parse();
    } else {
        // `cargo test --all-targets`: every input once, to see each one parses.
        for (_, text) in inputs() {
            black_box(parse_response(&text).is_ok());
        }
    }
}
