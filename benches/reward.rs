//! Parse + score throughput on realistic responses with a 30-element state.
//! Run: `cargo bench --bench reward` (throughput is reported in decisions/s).

use criterion::{Criterion, Throughput, criterion_group};
use rmsweb::action::Action;
use rmsweb::action::parse::parse_response;
use rmsweb::reward::{RewardConfig, score};
use rmsweb::trajectory::Element;
use serde_json::json;
use std::hint::black_box;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::best_cpu_seconds;

fn elements() -> Vec<Element> {
    (0..30u32)
        .map(|i| {
            let (tag, text) = match i % 5 {
                0 => ("a", format!("Result {i}: Hotel in Paris")),
                1 => ("button", "Add to cart".to_string()),
                2 => ("input", String::new()),
                3 => ("a", "Next".to_string()),
                _ => ("div", format!("Price ${}.99", 100 + i)),
            };
            let mut attrs = std::collections::BTreeMap::new();
            if tag == "a" {
                attrs.insert("href".to_string(), format!("/r/{}", i / 10));
            }
            if tag == "input" {
                attrs.insert("aria-label".to_string(), "Destination".to_string());
            }
            Element {
                index: i,
                tag: tag.into(),
                text,
                attrs,
                bbox: [0.0, f64::from(i) * 30.0, 200.0, 24.0],
                ..Element::default()
            }
        })
        .collect()
}

fn browser_use(action: &str) -> String {
    format!(
        r#"{{"thinking": "The search results page is loaded. I can see several hotels in Paris with prices. The task asks for the cheapest hotel near the Eiffel Tower for May 1, 2024, so I should open the next page of results to compare all offers before deciding.", "evaluation_previous_goal": "Success - the results for Paris are shown.", "memory": "Searched hotels in Paris for 2024-05-01. Page 1 checked: cheapest so far is $119.99 (Hotel Lumière).", "next_goal": "Go to the next page of results.", "action": [{action}]}}"#
    )
}

fn cases() -> Vec<(String, Action)> {
    let click13 = Action::new("click", json!({"index": 13}));
    vec![
        (browser_use(r#"{"click": {"index": 13}}"#), click13.clone()),
        (browser_use(r#"{"click": {"index": 8}}"#), click13.clone()),
        (browser_use(r#"{"click": {"index": 14}}"#), click13.clone()),
        (
            format!(
                "I will go on.\n```json\n{}\n```",
                browser_use(r#"{"click_element_by_index": {"index": 18}}"#)
            ),
            click13,
        ),
        (
            browser_use(r#"{"input_text": {"index": 2, "text": "paris "}}"#),
            Action::new("input", json!({"index": 7, "text": "Paris"})),
        ),
        (
            browser_use(
                r#"{"go_to_url": {"url": "https://hotels.test/search?city=paris&date=2024-05-01&utm_source=x"}}"#,
            ),
            Action::new(
                "navigate",
                json!({"url": "https://hotels.test/search?date=2024-05-01&city=paris"}),
            ),
        ),
        (
            browser_use(
                r#"{"search_google": {"query": "cheapest hotel paris eiffel tower may 2024"}}"#,
            ),
            Action::new(
                "search",
                json!({"query": "cheapest hotel near eiffel tower paris may 2024"}),
            ),
        ),
        (
            browser_use(
                r#"{"done": {"text": "The cheapest hotel is Hotel Lumière at $119.99 per night.", "success": true}}"#,
            ),
            Action::new(
                "done",
                json!({"text": "Hotel Lumière, $119.99 per night, is the cheapest.", "success": true}),
            ),
        ),
        (
            r#"input(7, "Paris")"#.to_string(),
            Action::new("input", json!({"index": 7, "text": "Paris"})),
        ),
        (
            "scroll(down=True, pages=2)".to_string(),
            Action::new("scroll", json!({"down": true, "pages": 1})),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let elements = elements();
    let cfg = RewardConfig::default();
    let cases = cases();
    let mut g = c.benchmark_group("reward");
    g.throughput(Throughput::Elements(cases.len() as u64));
    g.bench_function("parse_and_score", |b| {
        b.iter(|| {
            for (resp, target) in &cases {
                black_box(score(black_box(resp), target, &elements, &cfg));
            }
        })
    });
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            for (resp, _) in &cases {
                let _ = black_box(parse_response(black_box(resp)));
            }
        })
    });
    g.finish();
    if std::env::var_os("REWARD_BENCH_CASES").is_some() {
        let mut g = c.benchmark_group("case");
        for (i, (resp, target)) in cases.iter().enumerate() {
            let parsed = parse_response(resp).unwrap();
            g.bench_function(format!("{i}_{}", target.name), |b| {
                b.iter(|| {
                    black_box(rmsweb::reward::score_action(
                        &parsed.actions[0],
                        target,
                        &elements,
                        &cfg,
                    ))
                })
            });
        }
        g.finish();
    }
}

/// Prints decisions per CPU-second (parse + score) over the same cases.
fn decisions_per_cpu_second() {
    let elements = elements();
    let cfg = RewardConfig::default();
    let cases = cases();
    let rounds = 20_000;
    let (cpu, ()) = best_cpu_seconds(1, || {
        for _ in 0..rounds {
            for (resp, target) in &cases {
                black_box(score(black_box(resp), target, &elements, &cfg));
            }
        }
    });
    let n = rounds * cases.len();
    println!(
        "reward: {n} decisions (parse + score) in {cpu:.3} s of thread CPU time = {:.0} decisions/s per core",
        n as f64 / cpu
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this in test mode.
    if std::env::args().any(|a| a == "--bench") {
        decisions_per_cpu_second();
    }
}
