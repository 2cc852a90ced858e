//! `tasks overlap` at the size: 50,000 synthetic training tasks against
//! 1,000 benchmark tasks (each side's own templated phrasings filled from one
//! Zipf-like vocabulary of 5,000 words), 50 of the training tasks planted copies of
//! benchmark tasks inside a longer sentence. Prints the wall seconds of one check
//! (both cores) and how many plants it found.
//! Run: `cargo bench --bench overlap`; under `cargo test` a 2,000 × 100 check once.

use criterion::{Criterion, criterion_group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rmsweb::tasks::overlap::find_overlaps;
use rmsweb::tasks::overlap_config::OverlapConfig;
use rmsweb::trajectory::Task;
use std::hint::black_box;
use std::time::Instant;

/// Training tasks' phrasings (a seed-task generator's).
const TRAIN_TEMPLATES: [&str; 8] = [
    "find the cheapest {} on the website and add it to the cart",
    "show me {} near {} with at least four stars",
    "what is the {} of the {} listed on the first page",
    "book a {} for two people next friday in {}",
    "open the {} page and tell me the {}",
    "compare the {} and the {} and report which one is cheaper",
    "search for {} and sort the results by {}",
    "how many {} were posted in the {} forum last month",
];

/// The benchmark's own phrasings (a different author's).
const BENCH_TEMPLATES: [&str; 6] = [
    "get the {} of my most recent {} order",
    "list every {} that mentions {} in its reviews",
    "post a question about {} in the {} subreddit",
    "how long does it take to walk from {} to {}",
    "change the {} of the {} project to private",
    "tell me the {} with the most {} this year",
];

fn word(rng: &mut ChaCha8Rng) -> String {
    // Zipf-like: small ids far more often than large ones (5,000 words).
    let u: f64 = rng.random();
    format!("w{}", (5000f64.powf(u)) as u32)
}

fn instruction(rng: &mut ChaCha8Rng, templates: &[&str]) -> String {
    let mut text = templates[rng.random_range(0..templates.len())].to_string();
    while text.contains("{}") {
        let n = rng.random_range(1..4);
        let words: Vec<String> = (0..n).map(|_| word(rng)).collect();
        text = text.replacen("{}", &words.join(" "), 1);
    }
    text
}

fn task(id: String, instruction: String, site: u32) -> Task {
    Task {
        task_id: id,
        website: format!("https://site{site}.example.test"),
        domain: String::new(),
        category: String::new(),
        instruction,
        source: "synthetic".into(),
    }
}

/// (training tasks, benchmark tasks, planted copies).
fn corpus(train: usize, bench: usize) -> (Vec<Task>, Vec<Task>, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let b: Vec<Task> = (0..bench)
        .map(|i| {
            let text = instruction(&mut rng, &BENCH_TEMPLATES);
            task(format!("b{i}"), text, rng.random_range(0..200))
        })
        .collect();
    let mut planted = 0;
    let t: Vec<Task> = (0..train)
        .map(|i| {
            if i % 1000 == 999 {
                planted += 1;
                let src = &b[rng.random_range(0..b.len())];
                let text = format!("please help me: {} thanks", src.instruction);
                task(format!("t{i}"), text, rng.random_range(200..400))
            } else {
                let text = instruction(&mut rng, &TRAIN_TEMPLATES);
                task(format!("t{i}"), text, rng.random_range(0..400))
            }
        })
        .collect();
    (t, b, planted)
}

fn bench(c: &mut Criterion) {
    let (train, bench, _) = corpus(50_000, 1_000);
    let cfg = OverlapConfig::default();
    let mut g = c.benchmark_group("overlap");
    g.sample_size(10);
    g.bench_function("50k_x_1k", |b| {
        b.iter(|| black_box(find_overlaps(black_box(&train), black_box(&bench), &cfg)))
    });
    g.finish();
}

/// One check at the size: wall seconds, pairs scored, plants found.
fn figures(train: usize, bench: usize) {
    let (t, b, planted) = corpus(train, bench);
    let started = Instant::now();
    let o = find_overlaps(&t, &b, &OverlapConfig::default());
    let secs = started.elapsed().as_secs_f64();
    let found_plants = o
        .flagged_train()
        .iter()
        .filter(|&&i| i % 1000 == 999)
        .count();
    println!(
        "overlap {train} x {bench}: {secs:.2} s wall, {} pairs scored (of {} all pairs), {} flagged pairs on {} training tasks, {found_plants} of {planted} planted copies found",
        o.candidates,
        train * bench,
        o.flagged.len(),
        o.flagged_train().len(),
    );
    assert_eq!(found_plants, planted, "every planted copy is flagged");
}

criterion_group!(benches, bench);

fn main() {
    if std::env::args().any(|a| a == "--bench") {
        benches();
        Criterion::default().configure_from_args().final_summary();
        figures(50_000, 1_000);
    } else {
        figures(2_000, 100);
    }
}
