//! Opening and indexing a dataset of the paper's scale (150k steps), then reading a
//! random trajectory and the list summaries. Run with `cargo bench --bench store`;
//! under `cargo test` it runs once on a small dataset.

use criterion::{Criterion, criterion_group, criterion_main};
use rmsweb::action::Action;
use rmsweb::trajectory::{
    ActionResult, Dataset, Element, ModelOutput, Outcome, State, Step, Task, Trajectory,
};
use serde_json::json;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Writes `tasks` tasks × 4 attempts × ~15 steps × 30 elements.
fn generate(root: &Path, tasks: usize) {
    std::fs::create_dir_all(root).unwrap();
    let mut tf = std::io::BufWriter::new(std::fs::File::create(root.join("tasks.jsonl")).unwrap());
    let mut jf =
        std::io::BufWriter::new(std::fs::File::create(root.join("trajectories.jsonl")).unwrap());
    for t in 0..tasks {
        let task = Task {
            task_id: format!("t{t:05}"),
            website: format!("https://site{t}.test"),
            domain: "shopping".into(),
            category: "shopping".into(),
            instruction: format!("find item {t} under $50 and add it to the cart"),
            source: "synthetic".into(),
        };
        serde_json::to_writer(&mut tf, &task).unwrap();
        tf.write_all(b"\n").unwrap();
        for a in 0..4u32 {
            let n = 12 + ((t + a as usize) % 7);
            let steps = (0..n)
                .map(|i| Step {
                    index: i as u32,
                    state: State {
                        url: format!("https://site{t}.test/p{i}"),
                        title: format!("page {i}"),
                        elements: (0..30)
                            .map(|k| Element {
                                index: k,
                                tag: "a".into(),
                                role: "link".into(),
                                text: format!("result {k} price ${}", k * 3),
                                attrs: [("href".to_string(), format!("/item/{k}"))].into(),
                                bbox: [0.0, 20.0 * k as f64, 120.0, 18.0],
                            })
                            .collect(),
                        memory: format!("visited {i} pages"),
                        progress: i as f64 / (n - 1) as f64,
                        ..Default::default()
                    },
                    output: ModelOutput {
                        thinking: "the cheapest result is further down".into(),
                        next_goal: "open the result".into(),
                        actions: vec![Action::new("click", json!({"index": i % 30}))],
                        ..Default::default()
                    },
                    result: vec![ActionResult::default()],
                    timing: None,
                    ..Default::default()
                })
                .collect();
            let traj = Trajectory {
                id: format!("t{t:05}-a{a}"),
                task_id: task.task_id.clone(),
                attempt: a + 1,
                round: 1,
                reflection: None,
                source: "synthetic".into(),
                teacher: "synthetic".into(),
                outcome: Outcome {
                    success: a == 0,
                    ..Default::default()
                },
                steps,
            };
            serde_json::to_writer(&mut jf, &traj).unwrap();
            jf.write_all(b"\n").unwrap();
        }
    }
}

fn bench(c: &mut Criterion) {
    // ~2,600 tasks × 4 attempts × ~15 steps ≈ 150k steps.
    let tasks = if full_run() { 2_600 } else { 20 };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), tasks);
    let mut g = c.benchmark_group("store");
    g.sample_size(10);
    g.bench_function("open_and_first_record", |b| {
        b.iter(|| {
            let ds = Dataset::open(dir.path()).unwrap();
            black_box(ds.trajectory(0).unwrap());
        })
    });
    let ds = Dataset::open(dir.path()).unwrap();
    let n = ds.trajectory_count();
    let mut k = 0usize;
    g.bench_function("read_random_trajectory", |b| {
        b.iter(|| {
            k = (k * 7919 + 13) % n;
            black_box(ds.trajectory(k).unwrap());
        })
    });
    g.bench_function("lookup_by_id_cold", |b| {
        b.iter(|| {
            let ds = Dataset::open(dir.path()).unwrap();
            black_box(ds.position_of("t00010-a2"));
        })
    });
    g.bench_function("summaries_all", |b| {
        b.iter(|| black_box(ds.summaries().len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
