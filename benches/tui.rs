//! Workbench frame costs with ratatui's TestBackend (120x40, halfblocks):
//! first frame (open + draw, before the background load), key-to-frame (one key
//! handled + one frame drawn) on each tab, and plain redraws.
//!
//! Runs on the test dataset built by `tests/it/tui_data.rs`; set
//! `RMSWEB_BENCH_DATASET=DIR` to measure a large dataset instead (for instance
//! `python3 shared/bench/make_corpus.py DIR --tasks 2500`, about 150k steps).

#[path = "../tests/it/tui_data.rs"]
#[allow(dead_code)]
mod tui_data;

use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::tui::{App, Options, Theme};
use std::path::{Path, PathBuf};

fn open(root: &Path) -> App {
    App::new(Options {
        dataset: root.to_path_buf(),
        annotator: "bench".into(),
        theme: Theme::default(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap()
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = match std::env::var_os("RMSWEB_BENCH_DATASET") {
        Some(d) => PathBuf::from(d),
        None => {
            tui_data::build(tmp.path());
            tmp.path().to_path_buf()
        }
    };
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();

    let mut g = c.benchmark_group("first_frame");
    g.sample_size(10);
    g.bench_function("open_and_draw", |b| {
        b.iter(|| {
            let mut app = open(&root);
            term.draw(|f| app.draw(f)).unwrap();
            app
        })
    });
    g.finish();

    let mut app = open(&root);
    app.wait_loaded();
    term.draw(|f| app.draw(f)).unwrap();
    let mut g = c.benchmark_group("key_to_frame");
    // Alternate j and k so the selection keeps moving (each frame parses a new
    // trajectory or hits the cache exactly as a user scrolling would).
    let mut flip = false;
    g.bench_function("trajectories_j_k", |b| {
        b.iter(|| {
            flip = !flip;
            app.handle_key(key(if flip { 'j' } else { 'k' }));
            term.draw(|f| app.draw(f)).unwrap();
        })
    });
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    g.bench_function("steps_j_k", |b| {
        b.iter(|| {
            flip = !flip;
            app.handle_key(key(if flip { 'j' } else { 'k' }));
            term.draw(|f| app.draw(f)).unwrap();
        })
    });
    app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    app.handle_key(key('2'));
    g.bench_function("pairs_j_k", |b| {
        b.iter(|| {
            flip = !flip;
            app.handle_key(key(if flip { 'j' } else { 'k' }));
            term.draw(|f| app.draw(f)).unwrap();
        })
    });
    app.handle_key(key('3'));
    app.handle_key(key('e'));
    g.bench_function("reward_type_char", |b| {
        b.iter(|| {
            app.handle_key(key('x'));
            term.draw(|f| app.draw(f)).unwrap();
        })
    });
    app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    app.handle_key(key('1'));
    g.bench_function("filter_keystroke", |b| {
        b.iter(|| {
            app.handle_key(key('/'));
            app.handle_key(key('t'));
            app.handle_key(key('1'));
            term.draw(|f| app.draw(f)).unwrap();
            app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        })
    });
    g.finish();

    c.bench_function("redraw_trajectories", |b| {
        b.iter(|| {
            term.draw(|f| app.draw(f)).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
