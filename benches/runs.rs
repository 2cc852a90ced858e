//! The Runs tab on a long run: ingesting a generated 100k-step metrics file with
//! every metric key (`rmsweb::runs::synth`, about 100 MB), and redrawing the tab
//! (TestBackend 120×40) on it, raw and with EMA + log scale + wall time.
//!
//! `RMSWEB_RUNS_RSS=1 target/release/deps/runs-*` skips criterion: it ingests the
//! file once, draws once and prints what it holds, so `/usr/bin/time -v` gives the
//! peak RSS of a process watching that file.

use criterion::{Criterion, criterion_group};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::runs::monitor::{RunsState, Watcher};
use rmsweb::tui::action::{Action, Tab};
use rmsweb::tui::{App, Options, RunsOptions, Theme};
use std::path::Path;
use std::time::Instant;

const STEPS: u64 = 100_000;

/// A runs folder with one 100k-step run (`long`); `RMSWEB_RUNS_STEPS` changes the
/// length (e.g. 1 to measure the workbench without a long run).
fn make_runs(root: &Path) {
    let steps = std::env::var("RMSWEB_RUNS_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(STEPS);
    let dir = root.join("long");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("run.toml"),
        "kind = \"rl\"\npreset = \"paper\"\nmode = \"salvage-ds\"\n",
    )
    .unwrap();
    let f = std::fs::File::create(dir.join("metrics.jsonl")).unwrap();
    let mut w = std::io::BufWriter::new(f);
    rmsweb::runs::synth::write(&mut w, steps, 7).unwrap();
}

fn ingest(root: &Path) -> RunsState {
    let mut w = Watcher::new(Some(root.to_path_buf()), &[]);
    let mut st = RunsState::default();
    loop {
        let u = w.poll();
        let more = u.more;
        st.apply(u);
        if !more {
            break;
        }
    }
    st
}

fn open(runs: &Path) -> App {
    let mut app = App::new(Options {
        dataset: Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        annotator: "bench".into(),
        theme: Theme::default(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    app.set_runs(RunsOptions {
        root: Some(runs.to_path_buf()),
        ..Default::default()
    });
    app.update(Action::SwitchTab(Tab::Runs));
    app.views.runs.poll_now();
    app
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    make_runs(tmp.path());
    let mut g = c.benchmark_group("runs");
    g.sample_size(10);
    g.bench_function("ingest_100k_steps", |b| b.iter(|| ingest(tmp.path())));
    let mut app = open(tmp.path());
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    g.bench_function("redraw_100k_steps", |b| {
        b.iter(|| term.draw(|f| app.draw(f)).map(|_| ()).unwrap())
    });
    for k in ['L', '+', '+', '+', 'x'] {
        app.handle_key(KeyEvent::new(KeyCode::Char(k), KeyModifiers::NONE));
    }
    g.bench_function("redraw_100k_steps_ema_log_wall", |b| {
        b.iter(|| term.draw(|f| app.draw(f)).map(|_| ()).unwrap())
    });
    g.finish();
}

/// One ingest and one frame, with what it cost (for `/usr/bin/time -v`).
fn rss_probe() {
    let tmp = tempfile::tempdir().unwrap();
    make_runs(tmp.path());
    let size = std::fs::metadata(tmp.path().join("long/metrics.jsonl"))
        .unwrap()
        .len();
    let t = Instant::now();
    let mut app = open(tmp.path());
    let ingest_s = t.elapsed().as_secs_f64();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let t = Instant::now();
    term.draw(|f| app.draw(f)).unwrap();
    let draw_ms = t.elapsed().as_secs_f64() * 1e3;
    let st = app.views.runs.snapshot();
    let points: usize = st.runs.iter().map(|r| r.series.stored_points()).sum();
    println!(
        "file {:.1} MB, {} records, {} stored points over {} keys; open+ingest {:.2} s, first frame {:.1} ms",
        size as f64 / 1e6,
        st.runs[0].series.records(),
        points,
        st.runs[0].series.keys().count(),
        ingest_s,
        draw_ms
    );
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("RMSWEB_RUNS_RSS").is_some() {
        rss_probe();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
