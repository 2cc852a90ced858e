//! The Runs tab: snapshots on the recorded tiny SFT run (`fixtures/runs/sft-tiny`)
//! and the synthetic RL run (`tests/data/runs/rl-synth`, every metric key; made by
//! `rmsweb::runs::synth`, see `synthetic_rl_run_is_current`), and a real tiny SFT
//! run launched from the tab, watched and stopped.
//!
//! Each test copies the run folders it shows into its own runs folder, so another
//! fixture run added later changes nothing here.

use crate::tui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::runs::info::DisplayState;
use rmsweb::tui::action::{Action, Tab};
use rmsweb::tui::{App, Options, RunsOptions, Theme};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SYNTH_STEPS: u64 = 240;
/// A dead pid (above any pid_max): the synthetic run "running" shows as dead.
const DEAD_PID: u32 = 2_147_483_647;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes a synthetic RL run folder: run.toml, status.json (running with a dead
/// pid, a self-sharpening alert), metrics.jsonl and a stdout.log with an escape
/// sequence that must not reach the screen.
fn write_synth_run(dir: &Path, steps: u64, seed: u64, mode: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("run.toml"),
        format!("kind = \"rl\"\npreset = \"tiny\"\nmode = \"{mode}\"\ninit = \"runs/sft-tiny\"\nlr = 1e-6\n"),
    )
    .unwrap();
    let status = serde_json::json!({
        "state": "running",
        "pid": DEAD_PID,
        "started": "2026-11-29T10:00:00.000Z",
        "updated": "2026-11-29T11:00:00.000Z",
        "step": steps,
        "message": format!("step {steps}"),
        "alerts": [{"kind": "self_sharpening", "step": steps * 4 / 5,
                    "message": "gap, KL, clipfrac and log-ppl up while reward is flat"}],
    });
    std::fs::write(
        dir.join("status.json"),
        serde_json::to_string_pretty(&status).unwrap(),
    )
    .unwrap();
    let mut m = Vec::new();
    rmsweb::runs::synth::write(&mut m, steps, seed).unwrap();
    std::fs::write(dir.join("metrics.jsonl"), m).unwrap();
    std::fs::write(
        dir.join("stdout.log"),
        "2026-11-29T10:00:01.000Z rollouts: 16 groups of 8\n\
         2026-11-29T10:00:02.000Z \x1b[31mred\x1b[0m text from a model: \x07bell\n\
         2026-11-29T11:00:00.000Z step 240 reward 0.64\n",
    )
    .unwrap();
}

/// The checked-in synthetic run is what the generator writes (set
/// `RMSWEB_REGEN_RUNS=1` to rewrite it after changing the generator).
#[test]
fn synthetic_rl_run_is_current() {
    let d = tempfile::tempdir().unwrap();
    write_synth_run(d.path(), SYNTH_STEPS, 1, "salvage-ds");
    let checked_in = repo().join("tests/data/runs/rl-synth");
    if std::env::var_os("RMSWEB_REGEN_RUNS").is_some() {
        write_synth_run(&checked_in, SYNTH_STEPS, 1, "salvage-ds");
    }
    for f in ["run.toml", "status.json", "metrics.jsonl", "stdout.log"] {
        let want = std::fs::read(d.path().join(f)).unwrap();
        let have = std::fs::read(checked_in.join(f)).unwrap_or_default();
        assert!(
            want == have,
            "tests/data/runs/rl-synth/{f} is stale: RMSWEB_REGEN_RUNS=1 cargo test --test it runs_tab"
        );
    }
    let first = std::fs::read_to_string(checked_in.join("metrics.jsonl")).unwrap();
    let r = rmsweb::runs::tail::parse_line(first.lines().next().unwrap()).unwrap();
    for k in rmsweb::runs::synth::KEYS {
        assert!(r.data.iter().any(|(key, _)| key == k), "{k} missing");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
}

/// A runs folder holding copies of the named runs.
/// A runs folder holding copies of the named recorded runs.
pub fn runs_folder(names: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for n in names {
        let from = match *n {
            "sft-tiny" => repo().join("fixtures/runs/sft-tiny"),
            "rl-synth" => repo().join("tests/data/runs/rl-synth"),
            "rl-tiny" => repo().join("fixtures/runs/rl-tiny"),
            other => panic!("unknown run {other}"),
        };
        copy_dir(&from, &d.path().join(n));
    }
    d
}

/// The workbench on `dataset`, in the Runs tab on `runs`, polled once.
pub fn open(dataset: &Path, runs: RunsOptions) -> App {
    let mut app = App::new(Options {
        dataset: dataset.to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::load("dark").unwrap(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    app.set_runs(runs);
    app.update(Action::SwitchTab(Tab::Runs));
    app.views.runs.poll_now();
    app
}

fn fixed_now() -> chrono::DateTime<chrono::Utc> {
    "2026-11-29T12:30:00Z".parse().unwrap()
}

/// Runs options on `root` with a fixed clock.
pub fn opts(root: &Path) -> RunsOptions {
    RunsOptions {
        root: Some(root.to_path_buf()),
        now: Some(fixed_now()),
        ..Default::default()
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(app: &mut App, keys: &str) {
    for c in keys.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

fn screen(app: &mut App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    t.backend().to_string()
}

/// The screen for snapshots: without the status bar (the dataset's counts, not
/// this tab's), and with the temporary folders (and the padding after them, which
/// depends on their length) replaced by `<tmp>`.
fn snap(app: &mut App, runs: &Path) -> String {
    let tmp = runs.parent().unwrap_or(runs);
    let re = regex::Regex::new(&format!(
        r"{}/\.tmp\w+(/\S*)?[ ━]*",
        regex::escape(&tmp.display().to_string())
    ))
    .unwrap();
    let screen = screen(app);
    let body = screen
        .trim_end()
        .rsplit_once('\n')
        .map_or(screen.as_str(), |(b, _)| b);
    re.replace_all(body, "<tmp>$1 ").into_owned()
}

#[test]
fn snapshot_runs_list_on_the_recorded_sft_run() {
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("sft-tiny"));
    let s = snap(&mut app, runs.path());
    assert!(s.contains("sft-tiny") && s.contains("rl-synth"));
    assert!(s.contains("finished") && s.contains("dead"), "{s}");
    assert!(s.contains("SFT loss"));
    insta::assert_snapshot!("runs_list", s);
}

/// The recorded real tiny RL run (fixtures/runs/rl-tiny, written by the trainer):
/// finished, every RL panel has data, the rollout reward shown is its last step's.
#[test]
fn snapshot_recorded_rl_tiny_run() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-tiny"]);
    let mut app = open(data.path(), opts(runs.path()));
    let s = snap(&mut app, runs.path());
    assert!(s.contains("rl-tiny") && s.contains("finished"), "{s}");
    let last = std::fs::read_to_string(repo().join("fixtures/runs/rl-tiny/metrics.jsonl"))
        .unwrap()
        .lines()
        .last()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .unwrap();
    let reward = last["data"]["critic/score/mean"].as_f64().unwrap();
    assert!(s.contains(&format!("reward {reward:.3}")), "{s}");
    assert!(
        !s.contains("self-sharpening in"),
        "the recorded run raised no alert"
    );
    insta::assert_snapshot!("runs_rl_tiny", s);
}

/// What the launch form starts is accepted by the real command line for both kinds
/// and every mode: the run fails on the missing init/dataset, never on the arguments.
#[test]
fn launch_arguments_parse_with_the_real_cli() {
    use rmsweb::runs::launch::LaunchSpec;
    use rmsweb::train::rl::groups::Mode;
    let tmp = tempfile::tempdir().unwrap();
    let mut specs = vec![LaunchSpec {
        kind: "sft".into(),
        preset: "tiny".into(),
        dataset: tmp.path().join("no-dataset"),
        steps: Some(3),
        lr: Some(1e-3),
        sets: vec!["seed=7".into()],
        ..Default::default()
    }];
    for m in Mode::ALL.map(Mode::name) {
        specs.push(LaunchSpec {
            kind: "rl".into(),
            preset: "tiny".into(),
            dataset: repo().join("fixtures"),
            steps: Some(2),
            lr: Some(1e-4),
            mode: Some(m.into()),
            init: Some(tmp.path().join("no-sft-run")),
            sets: vec!["n=4".into()],
        });
    }
    for (i, spec) in specs.iter().enumerate() {
        spec.validate().unwrap();
        let args = spec.args(&tmp.path().join(format!("run-{i}")));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            !err.contains("Usage:") && !err.contains("unexpected argument"),
            "{args:?}: {err}"
        );
        let what = if spec.kind == "rl" {
            "no-sft-run"
        } else {
            "no-dataset"
        };
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

#[test]
fn snapshot_rl_panels_with_the_self_sharpening_banner() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    let s = snap(&mut app, runs.path());
    for title in [
        "gates ━std ━comp",
        "acc 11 salv 0",
        "KL",
        "clipfrac",
        "logp",
        "reward",
        "rollout log-ppl",
    ] {
        assert!(s.contains(title), "panel {title} missing:\n{s}");
    }
    assert!(s.contains("self-sharpening"), "banner");
    assert!(
        !s.contains('\x1b') && !s.contains('\x07'),
        "log text is sanitized"
    );
    insta::assert_snapshot!("runs_rl", s);
}

#[test]
fn banner_also_comes_from_the_metric_alone() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("verl");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (s, flag) in [(1, 0), (2, 1)] {
        text.push_str(&format!(
            "{{\"step\": {s}, \"data\": {{\"critic/score/mean\": 0.5, \"alerts/self_sharpening\": {flag}}}}}\n"
        ));
    }
    std::fs::write(dir.join("metrics.jsonl"), &text).unwrap();
    // Watched by path, not in the runs folder.
    let mut app = open(
        data.path(),
        RunsOptions {
            root: None,
            watch: vec![dir.join("metrics.jsonl")],
            now: Some(fixed_now()),
            ..Default::default()
        },
    );
    assert!(screen(&mut app).contains("self-sharpening"));
    std::fs::write(
        dir.join("metrics.jsonl"),
        text.replace(
            "\"alerts/self_sharpening\": 1",
            "\"alerts/self_sharpening\": 0",
        ),
    )
    .unwrap();
    app.views.runs.poll_now();
    assert!(
        !screen(&mut app).contains("self-sharpening"),
        "cleared once the flag is 0"
    );
}

#[test]
fn snapshot_overlay_of_marked_runs() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    write_synth_run(&runs.path().join("rl-dapo"), 160, 2, "dapo");
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-dapo"));
    press(&mut app, " ");
    app.handle_key(key(KeyCode::Down));
    press(&mut app, " ");
    let s = snap(&mut app, runs.path());
    assert!(
        s.contains("■ rl-dapo") && s.contains("■ rl-synth"),
        "both runs in the legend:\n{s}"
    );
    assert_eq!(s.matches('●').count(), 2, "two marks");
    insta::assert_snapshot!("runs_overlay", s);
}

#[test]
fn snapshot_log_scale_ema_and_wall_time() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    let linear = screen(&mut app);
    press(&mut app, "L+++x");
    let v = app.views.runs.view();
    assert!(v.log && v.wall);
    assert_eq!(v.ema, 0.9);
    let s = snap(&mut app, runs.path());
    assert_ne!(s, linear);
    assert!(s.contains("x wall time · EMA 0.9 · log"), "{s}");
    // The wall-time axis comes from perf/step_s: 240 steps of ~12 s.
    assert!(s.contains("48m"), "{s}");
    insta::assert_snapshot!("runs_log_scale", s);
    press(&mut app, "---L");
    assert_eq!(app.views.runs.view().ema, 0.0);
    assert!(!app.views.runs.view().log);
}

#[test]
fn snapshot_launch_form_and_its_errors() {
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny"]);
    let mut app = open(data.path(), opts(runs.path()));
    press(&mut app, "n");
    let s = snap(&mut app, runs.path());
    assert!(s.contains("Launch a run"));
    insta::assert_snapshot!("runs_launch_form", s);
    // kind → rl; Enter without init is refused and names the field; q types, not quits.
    app.handle_key(key(KeyCode::Right));
    app.handle_key(key(KeyCode::Enter));
    assert!(screen(&mut app).contains("init: an RL run starts from an SFT run folder"));
    press(&mut app, "q");
    assert!(!app.should_quit());
    app.handle_key(key(KeyCode::Esc));
    assert!(!screen(&mut app).contains("Launch a run"));
    // Stop and kill on a finished run do nothing but say so.
    press(&mut app, "s");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap()
            .contains("not running")
    );
    press(&mut app, "K");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap()
            .contains("nothing to kill")
    );
}

fn status_state(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("status.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("state")?.as_str().map(str::to_string)
}

/// Kills the launched process if the test fails before stopping it.
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rmsweb::runs::launch::kill(pid);
        }
    }
}

#[test]
fn launches_a_tiny_sft_run_sees_metrics_stops_resumes_and_kills_it() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let mut app = open(
        data.path(),
        RunsOptions {
            root: Some(runs.path().join("runs")),
            binary: Some(PathBuf::from(env!("CARGO_BIN_EXE_rmsweb"))),
            ..Default::default()
        },
    );
    press(&mut app, "n");
    // steps: 100000 (so a stop always comes first); overrides: a very small model.
    for _ in 0..3 {
        app.handle_key(key(KeyCode::Tab));
    }
    app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, "100000");
    for _ in 0..4 {
        app.handle_key(key(KeyCode::Tab));
    }
    press(
        &mut app,
        "epochs=100000 context=64 micro_batch=1 grad_accum=1 checkpoint_every=100000 \
         tiny.vocab_size=512 tiny.hidden_size=32 tiny.num_hidden_layers=1 \
         tiny.num_attention_heads=2 tiny.num_key_value_heads=1 tiny.head_dim=16 \
         tiny.intermediate_size=64",
    );
    app.handle_key(key(KeyCode::Enter));
    let msg = app.shared.message.clone().unwrap_or_default();
    assert!(msg.starts_with("launched"), "{msg}");
    let metrics = app.views.runs.selected().unwrap().to_path_buf();
    let dir = metrics.parent().unwrap().to_path_buf();
    let mut guard = KillOnDrop(None);

    let deadline = Instant::now() + Duration::from_secs(90);
    let mut running_pid = None;
    loop {
        app.views.runs.poll_now();
        let st = app.views.runs.snapshot();
        let t = st.find(&metrics).expect("the launched run is listed");
        if t.state() == DisplayState::Running {
            running_pid = t.info.status.pid;
            guard.0 = running_pid;
        }
        if t.series.get("sft/loss").is_some_and(|s| s.count() >= 2) && running_pid.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no metrics in time; state {:?}, log:\n{}",
            t.state(),
            std::fs::read_to_string(dir.join("stdout.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = screen(&mut app);
    assert!(s.contains("running") && s.contains("SFT loss"), "{s}");
    // Detached: the run leads its own session (a closed terminal does not reach it).
    let pid = running_pid.unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let session = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(3)
        .unwrap();
    assert_eq!(session, pid.to_string(), "{stat}");

    press(&mut app, "s");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap_or("")
            .contains("stop sent")
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = status_state(&dir);
        if matches!(state.as_deref(), Some("stopped") | Some("finished")) {
            assert_eq!(state.as_deref(), Some("stopped"), "the stop came first");
            break;
        }
        assert!(Instant::now() < deadline, "not stopped in time: {state:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    guard.0 = None;
    // The process exits after writing `stopped`; the tab shows it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while running_pid.is_some_and(rmsweb::runs::info::pid_alive) {
        app.views.runs.poll_now();
        assert!(Instant::now() < deadline, "process still alive after stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    app.views.runs.poll_now();
    let st = app.views.runs.snapshot();
    let stopped_at = st.find(&metrics).unwrap().series.last_step().unwrap();
    assert_eq!(st.find(&metrics).unwrap().state(), DisplayState::Stopped);
    assert!(dir.join("stdout.log").is_file());

    // r resumes it from its checkpoint: running again, new steps arrive.
    press(&mut app, "r");
    let msg = app.shared.message.clone().unwrap_or_default();
    assert!(msg.starts_with("resuming"), "{msg}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        app.views.runs.poll_now();
        let st = app.views.runs.snapshot();
        let t = st.find(&metrics).unwrap();
        if t.state() == DisplayState::Running
            && t.info.status.pid != running_pid
            && t.series.last_step().is_some_and(|s| s > stopped_at)
        {
            break t.info.status.pid.unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "not resumed in time: {:?}",
            t.state()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    guard.0 = Some(pid);

    // K asks first; anything but y cancels; y kills: the run shows as dead.
    press(&mut app, "K");
    assert!(screen(&mut app).contains("with SIGKILL?"));
    press(&mut app, "n");
    assert_eq!(app.shared.message.as_deref(), Some("kill cancelled"));
    assert!(rmsweb::runs::info::pid_alive(pid));
    press(&mut app, "K");
    press(&mut app, "y");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("killed")
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        app.views.runs.poll_now();
        if app.views.runs.snapshot().find(&metrics).unwrap().state() == DisplayState::Lost {
            break;
        }
        assert!(Instant::now() < deadline, "a killed run must show as dead");
        std::thread::sleep(Duration::from_millis(50));
    }
    guard.0 = None;
    assert!(screen(&mut app).contains("dead"));
}

#[test]
fn workbench_takes_runs_and_watch_options() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--runs <RUNS>") && help.contains("--watch <FILE>"),
        "{help}"
    );
}

#[test]
fn draws_at_any_size_with_popups_open() {
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-synth"]);
    // A "running" run whose pid is alive (this test process): K asks to kill it.
    let live = runs.path().join("live");
    copy_dir(&repo().join("fixtures/runs/sft-tiny"), &live);
    let status = serde_json::json!({"state": "running", "pid": std::process::id(), "step": 3,
        "started": "2026-11-29T12:00:00Z", "updated": "2026-11-29T12:29:00Z", "message": "step 3"});
    std::fs::write(live.join("status.json"), status.to_string()).unwrap();
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("live"));
    press(&mut app, " ");
    app.handle_key(key(KeyCode::Down));
    press(&mut app, " ");
    for (w, h) in [(1, 1), (20, 5), (45, 12), (80, 24), (220, 70)] {
        for popup in ["", "n", "K"] {
            assert!(app.views.runs.select_id("live"));
            press(&mut app, popup);
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            t.draw(|f| app.draw(f)).unwrap();
            // Leave the popup without killing anything.
            app.handle_key(key(KeyCode::Esc));
        }
    }
    assert_eq!(app.shared.message.as_deref(), Some("kill cancelled"));
    assert!(screen(&mut app).contains("running"));
}

#[test]
fn background_poller_brings_new_metrics_and_asks_for_a_redraw() {
    use rmsweb::tui::components::runs::RunsView;
    let runs = tempfile::tempdir().unwrap();
    let mut view = RunsView::new(opts(runs.path()));
    view.start_background().unwrap();
    assert!(!view.poll_now(), "polling belongs to the thread now");
    let dir = runs.path().join("r1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("metrics.jsonl"),
        "{\"step\": 1, \"data\": {\"sft/loss\": 2.0}}\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let redraw = view.tick();
        let st = view.snapshot();
        if let Some(t) = st.runs.first()
            && t.series.latest("sft/loss") == Some(2.0)
        {
            // The data came before this tick (which then said redraw) or after it
            // (and the next tick says so).
            assert!(redraw || view.tick(), "new data must ask for a redraw");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the background poller did not read the run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing changes: no redraw asked.
    std::thread::sleep(Duration::from_millis(1200));
    view.tick();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(!view.tick(), "idle polls do not ask for redraws");
}

#[test]
fn a_launch_that_dies_before_its_status_shows_its_exit_code_and_log() {
    use std::os::unix::fs::PermissionsExt;
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let bin = runs.path().join("fake-rmsweb");
    std::fs::write(
        &bin,
        "#!/bin/sh\necho \"args: $*\"\nsleep 1\necho 'error: no such preset' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut app = open(
        data.path(),
        RunsOptions {
            root: Some(runs.path().join("runs")),
            binary: Some(bin),
            now: Some(fixed_now()),
            ..Default::default()
        },
    );
    press(&mut app, "n");
    app.handle_key(key(KeyCode::Enter));
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap_or("")
            .starts_with("launched")
    );
    assert!(screen(&mut app).contains("starting"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        app.views.runs.poll_now();
        let s = screen(&mut app);
        if s.contains("exit 3") {
            assert!(
                s.contains("error: no such preset"),
                "the log tail says why:\n{s}"
            );
            assert!(s.contains("args: train sft --preset tiny"), "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn slash_filters_the_runs_list() {
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    press(&mut app, "/dead");
    app.handle_key(key(KeyCode::Enter));
    let s = screen(&mut app);
    assert!(s.contains("rl-synth") && !s.contains("sft-tiny"), "{s}");
    assert!(s.contains("filter: dead"));
    // The selection follows the filter: s acts on the run shown.
    press(&mut app, "s");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap()
            .starts_with("rl-synth is dead")
    );
    press(&mut app, "/");
    app.handle_key(key(KeyCode::Esc));
    let s = screen(&mut app);
    assert!(s.contains("rl-synth") && s.contains("sft-tiny"));
    press(&mut app, "/nothing");
    assert!(screen(&mut app).contains("no run matches the filter `nothing`"));
}

/// `o` on an RL run opens its rollout groups in the Reward tab: each sample fills the
/// candidate, its recorded decision stands beside the live one, a recorded decision
/// the rubric no longer makes is flagged, and a prompt that is not a mined pair of
/// the dataset shows the recorded decisions only.
#[test]
fn rollouts_open_in_the_reward_tab_and_recorded_decisions_are_checked_live() {
    use rmsweb::mine::pair::MinedPair;
    let data = tui::fixtures();
    let pair: MinedPair = serde_json::from_str(
        std::fs::read_to_string(data.path().join("mined/pairs.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let right = rmsweb::action::render::render_call(&pair.target_action);
    let wrong = rmsweb::action::render::render_call(&pair.loc_action);
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("rl-check");
    copy_dir(&repo().join("fixtures/runs/rl-tiny"), &dir);
    let group = |prompt: &str, samples: serde_json::Value| {
        serde_json::json!({"step": 3, "prompt_id": prompt, "gate": "accepted",
            "routed": "rl", "samples": samples})
        .to_string()
    };
    let lines = [
        group(
            &pair.id,
            serde_json::json!([
                {"text": right, "reward": 1.0, "rule": "__live__"},
                // Recorded as a full success: the rubric today disagrees.
                {"text": wrong, "reward": 1.0, "rule": "click.same_index"},
            ]),
        ),
        group(
            "not-a-pair",
            serde_json::json!([{"text": "click(1)", "reward": 0.3, "rule": "click.other_element"}]),
        ),
    ];
    // The first sample's recorded decision is what the rubric says now.
    let elements = {
        let ds = rmsweb::trajectory::Dataset::open(data.path()).unwrap();
        let t = ds
            .trajectory_by_id(&pair.success.trajectory)
            .unwrap()
            .unwrap();
        t.steps
            .iter()
            .find(|s| s.index == pair.success.step)
            .unwrap()
            .state
            .elements
            .clone()
    };
    let live = rmsweb::reward::score(
        &right,
        &pair.target_action,
        &elements,
        &rmsweb::reward::RewardConfig::default(),
    );
    let first = lines[0].replace("__live__", &live.rule);
    std::fs::write(
        dir.join("rollouts.jsonl"),
        format!("{first}\n{}\n", lines[1]),
    )
    .unwrap();
    assert_eq!(live.score, 1.0, "{live:?}");

    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-check"));
    press(&mut app, "o");
    assert_eq!(app.tab, Tab::Reward);
    let s = screen(&mut app);
    assert!(s.contains("Rollouts: rl-check"), "{s}");
    assert!(s.contains(&format!("Recorded: 1.00 {}", live.rule)), "{s}");
    assert!(!s.contains("≠ live decision"), "{s}");
    assert_eq!(app.views.reward.candidate.lines().join("\n"), right);
    // Next sample: recorded 1.0, the rubric says otherwise now.
    press(&mut app, "l");
    let s = screen(&mut app);
    assert_eq!(app.views.reward.candidate.lines().join("\n"), wrong);
    assert!(s.contains("≠ live decision"), "{s}");
    insta::assert_snapshot!("reward_rollouts", snap(&mut app, runs.path()));
    // Next group: its prompt is not a mined pair here.
    press(&mut app, "j");
    let s = screen(&mut app);
    assert!(s.contains("not a mined pair of this dataset"), "{s}");
    assert!(s.contains("click.other_element"), "{s}");
    // An SFT run has no rollouts: a clear message, the tab stays.
    let sft = runs.path().join("sft-tiny");
    copy_dir(&repo().join("fixtures/runs/sft-tiny"), &sft);
    app.views.runs.poll_now();
    press(&mut app, "4");
    assert!(app.views.runs.select_id("sft-tiny"));
    press(&mut app, "o");
    assert_eq!(app.tab, Tab::Runs);
    assert!(
        app.shared
            .message
            .as_deref()
            .is_some_and(|m| m.contains("only RL runs")),
        "{:?}",
        app.shared.message
    );
}

/// The Runs tab on one watched metrics file, no runs folder.
fn watching(file: &Path) -> RunsOptions {
    RunsOptions {
        root: None,
        watch: vec![file.to_path_buf()],
        now: Some(fixed_now()),
        ..Default::default()
    }
}

/// A verl file-logger stream (orjson: NaN as null): verl's own keys, nested and
/// text values, validation every 5 steps.
fn verl_metrics(steps: u64) -> String {
    let mut s = String::new();
    for i in 1..=steps {
        let t = i as f64;
        let mut d = serde_json::json!({
            "actor/pg_loss": if i % 7 == 0 { serde_json::Value::Null } else { serde_json::json!(-0.01 * t) },
            "actor/ppo_kl": 1e-3 * t,
            "actor/pg_clipfrac": 0.01 + 0.001 * t,
            "critic/score/mean": 0.4 + 0.01 * t,
            "response_length/mean": 100.0 + t,
            "response_length/max": 200.0 + 2.0 * t,
            "response_length/min": 20.0,
            "timing_s/step": 30.0 + t,
            "timing_s/gen": 20.0,
            "timing_s/update_actor": 8.0,
            "training/filter_groups/evicted_samples": (i % 5) as f64,
            "salvage/accepted_groups": 64.0,
            "perf/max_memory_allocated_gb": {"rank0": 40.5, "rank1": 41.0},
            "note": "text",
        });
        if i % 5 == 0 {
            d["val-core/rmsweb/miniwob/reward/mean@1"] = serde_json::json!(0.3 + 0.02 * t);
        }
        s.push_str(&serde_json::json!({"step": i, "data": d}).to_string());
        s.push('\n');
    }
    s
}

#[test]
fn snapshot_verl_file_panels_gaps_and_pages() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("rmsweb");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("salvage-ds.jsonl");
    std::fs::write(&file, verl_metrics(30)).unwrap();
    let mut app = open(data.path(), watching(&file));
    let st = app.views.runs.snapshot();
    let t = &st.runs[0];
    assert_eq!(t.series.get("actor/pg_loss").unwrap().gaps(), 4);
    assert_eq!(
        t.series.latest("perf/max_memory_allocated_gb/rank1"),
        Some(41.0)
    );
    assert_eq!(t.series.skipped(), ["note".to_string()]);
    let s = snap(&mut app, runs.path());
    for want in [
        "pg loss",
        "response length",
        "timing (s)",
        "groups",
        "4 missing",
    ] {
        assert!(s.contains(want), "{want}:\n{s}");
    }
    assert!(s.contains("non-numeric keys not plotted: note"), "{s}");
    insta::assert_snapshot!("runs_verl_file", s);
    // The validation panel is past the first eight: `]` pages to it, `[` back.
    if !s.contains("validation") {
        press(&mut app, "]");
        let s2 = snap(&mut app, runs.path());
        assert!(
            s2.contains("validation") && s2.contains("rmsweb/miniwob/reward/mean@1"),
            "{s2}"
        );
        press(&mut app, "[");
    }
    assert_eq!(snap(&mut app, runs.path()), s);
}

#[test]
fn a_watched_verl_file_is_waiting_until_verl_creates_it() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let file = runs.path().join("rmsweb").join("salvage-ds.jsonl");
    let mut app = open(data.path(), watching(&file));
    let s = screen(&mut app);
    assert!(s.contains("waiting for verl to start"), "{s}");
    assert!(s.contains("waiting") && !s.contains("gone"), "{s}");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, verl_metrics(3)).unwrap();
    app.views.runs.poll_now();
    let s = screen(&mut app);
    assert!(
        s.contains("response length") && !s.contains("waiting for verl"),
        "{s}"
    );
    // Once seen, a folder that disappears is gone.
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    app.views.runs.poll_now();
    assert!(screen(&mut app).contains("gone"));
}

#[test]
fn the_monitor_detects_self_sharpening_in_any_stream_with_its_keys() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let file = runs.path().join("verl.jsonl");
    let wiggle = |i: u64| [0.0, 0.3, -0.2, 0.1, -0.3, 0.2][(i % 6) as usize];
    let mut text = String::new();
    for i in 0..30u64 {
        let t = i as f64;
        let d = serde_json::json!({
            "salvage/logprob_gap": 1.0 + 0.1 * t + 0.02 * wiggle(i),
            "salvage/logprob_wrong": -3.0,
            "actor/ppo_kl": 1e-3 * (1.0 + 0.2 * t + 0.05 * wiggle(i + 1)),
            "actor/pg_clipfrac": 0.02 + 0.01 * t + 0.002 * wiggle(i + 2),
            "rollout_corr/rollout_log_ppl": 0.5 + 0.05 * t + 0.01 * wiggle(i + 3),
            "critic/score/mean": 0.6 + 0.005 * wiggle(i + 4),
        });
        text.push_str(&serde_json::json!({"step": i + 1, "data": d}).to_string());
        text.push('\n');
    }
    // The first 15 steps: the window (20) is not full yet.
    let half: String = text.lines().take(15).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &half).unwrap();
    let mut app = open(data.path(), watching(&file));
    assert!(!screen(&mut app).contains("self-sharpening in"));
    std::fs::write(&file, &text).unwrap();
    app.views.runs.poll_now();
    let s = screen(&mut app);
    assert!(s.contains("self-sharpening in"), "{s}");
    let st = app.views.runs.snapshot();
    let w = &st.runs[0].sharpening;
    assert_eq!(w.fed, 30);
    assert_eq!(
        w.alert.as_ref().map(|a| a.0),
        Some(20),
        "alerted when the window filled"
    );
}

#[test]
fn launch_form_kind_verl_starts_a_supervised_verl_run() {
    use std::os::unix::fs::PermissionsExt;
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let export = runs.path().join("export");
    std::fs::create_dir_all(&export).unwrap();
    // A stand-in run.sh: writes one metrics line where verl's file logger would.
    std::fs::write(
        export.join("run.sh"),
        "#!/usr/bin/env bash\nprintf '{\"step\":1,\"data\":{\"critic/score/mean\":0.5}}\\n' > \"$VERL_FILE_LOGGER_PATH\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        export.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut app = open(
        data.path(),
        RunsOptions {
            root: Some(runs.path().join("runs")),
            binary: Some(PathBuf::from(env!("CARGO_BIN_EXE_rmsweb"))),
            ..Default::default()
        },
    );
    press(&mut app, "n");
    app.handle_key(key(KeyCode::Left)); // kind: sft → verl
    assert!(screen(&mut app).contains("gpus/node"));
    app.handle_key(key(KeyCode::Tab));
    app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &export.display().to_string());
    app.handle_key(key(KeyCode::Enter));
    let msg = app.shared.message.clone().unwrap_or_default();
    assert!(msg.starts_with("launched"), "{msg}");
    let metrics = app.views.runs.selected().unwrap().to_path_buf();
    let dir = metrics.parent().unwrap().to_path_buf();
    assert!(
        dir.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("verl-")
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        app.views.runs.poll_now();
        let st = app.views.runs.snapshot();
        let t = st.find(&metrics).expect("listed");
        if t.state() == DisplayState::Finished && t.series.latest("critic/score/mean") == Some(0.5)
        {
            assert_eq!(t.kind(), Some("verl"));
            break;
        }
        assert!(Instant::now() < deadline, "state {:?}", t.state());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dir.join("metrics.attempt-1.jsonl").is_file());
}

/// Launched while other runs are listed and the poller runs in the background (as
/// in the workbench), the new run is selected at once and stays selected until it
/// is listed, and then its row is the highlighted one, drawn in the selection
/// style in every cell (its coloured state too).
#[test]
fn a_launched_run_is_selected_and_its_row_drawn_readable() {
    use std::os::unix::fs::PermissionsExt;
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-synth"]);
    let bins = tempfile::tempdir().unwrap();
    let bin = bins.path().join("fake-rmsweb");
    std::fs::write(&bin, "#!/bin/sh\nsleep 8\nexit 3\n").unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut app = open(
        data.path(),
        RunsOptions {
            root: Some(runs.path().to_path_buf()),
            binary: Some(bin),
            now: Some(fixed_now()),
            ..Default::default()
        },
    );
    app.views.runs.start_background().unwrap();
    press(&mut app, "n");
    app.handle_key(key(KeyCode::Enter));
    let launched = app.views.runs.selected().unwrap().to_path_buf();
    let id = launched
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let selected_bg = Theme::load("dark").unwrap().selected().bg;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
        t.draw(|f| app.draw(f)).unwrap();
        assert_eq!(app.views.runs.selected(), Some(launched.as_path()), "kept");
        let buf = t.backend().buffer().clone();
        // A row of the runs table (the one pane with a thick border): the id may also
        // be in the status bar's "launched" message before the run is listed.
        let row = (0..buf.area.height).find(|&y| {
            let text: String = (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect();
            text.starts_with('┃') && text.contains(&id[..id.len().min(20)])
        });
        if let Some(y) = row {
            // Every cell of the row carries the selection's background.
            let xs: Vec<u16> = (1..buf.area.width / 2).collect();
            let off: Vec<u16> = xs
                .iter()
                .copied()
                .filter(|&x| buf[(x, y)].style().bg != selected_bg)
                .collect();
            assert!(off.len() < 3, "cells off the selection style at x {off:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the launched run never showed");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running run whose status gives its total steps shows its pace (mean of the
/// last five step durations) and the time left, in the table and the info pane.
#[test]
fn a_running_run_shows_its_pace_and_time_left() {
    let data = tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("sft-live");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.toml"), "kind = \"sft\"\npreset = \"lora\"\n").unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    std::fs::write(
        dir.join("status.json"),
        serde_json::json!({"state": "running", "pid": std::process::id(), "started": now,
            "updated": now, "step": 4, "total_steps": 40, "message": "step 4/40"})
        .to_string(),
    )
    .unwrap();
    // Step times 90, 60, 60, 60, 60: the last five average 66 s.
    let lines: String = [90.0, 60.0, 60.0, 60.0, 60.0]
        .iter()
        .enumerate()
        .map(|(i, dt)| {
            format!(
                "{}\n",
                serde_json::json!({"step": i, "data": {"sft/loss": 0.1, "perf/step_s": dt}})
            )
        })
        .collect();
    std::fs::write(dir.join("metrics.jsonl"), lines).unwrap();
    let mut app = open(data.path(), opts(runs.path()));
    let s = screen(&mut app);
    let row = s.lines().find(|l| l.contains("sft-live")).unwrap();
    // 36 steps left at 66 s: 2,376 s, shown as 40m.
    assert!(row.contains("66.0") && row.contains("40m"), "{s}");
    assert!(s.contains("s/step") && s.contains("ETA"), "{s}");
    assert!(s.contains("pace: 66.0 s/step · 39.6 min left"), "{s}");
}

fn screen_at(app: &mut App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    t.backend().buffer().clone()
}

fn rows(b: &ratatui::buffer::Buffer) -> Vec<String> {
    (0..b.area.height)
        .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect())
        .collect()
}

/// At 80×24 the panels keep four plot rows (both y labels) and page with `[` `]`;
/// a value line that does not fit is cut at its end, never at its start.
#[test]
fn on_an_80x24_terminal_the_panels_stay_readable_and_page() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-synth"));
    let r = rows(&screen_at(&mut app, 80, 24));
    // The table's headers and values whole (kind and age give way).
    let header = r
        .iter()
        .find(|l| l.contains(" run "))
        .expect("the table header");
    for h in ["state", "preset", "mode", "step", "s/step", "ETA", "latest"] {
        assert!(header.contains(&format!(" {h} ")), "{h}: {header}");
    }
    assert!(
        r.iter().any(|l| l.contains("salvage-ds")),
        "{}",
        r.join("\n")
    );
    let top = r
        .iter()
        .position(|l| l.contains("┌ gates"))
        .expect("the gates panel");
    let axis = r[top..].iter().position(|l| l.contains("└───")).unwrap() + top;
    assert!(
        axis - top > 4,
        "plot rows: {}\n{}",
        axis - top - 1,
        r.join("\n")
    );
    // Both y labels of the gates panel (top and bottom of its range) are shown.
    let labels: Vec<&str> = r[top + 1..axis]
        .iter()
        .filter_map(|l| l.strip_prefix('│')?.split('│').next())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    let bottom = &r[axis + 2];
    assert!(bottom.contains(" now 0.025 · 0.042 "), "{bottom}");
    press(&mut app, "]");
    // Thirteen panels, three to a page at this size.
    assert_eq!(app.shared.message.as_deref(), Some("panels page 2 of 5"));
    let r = rows(&screen_at(&mut app, 80, 24));
    assert!(r.iter().any(|l| l.contains("┌ logp")), "{}", r.join("\n"));
    // Where a value line is longer than its panel it ends in `…`, its start kept.
    press(&mut app, "]]");
    let r = rows(&screen_at(&mut app, 48, 24));
    for l in r.iter().filter(|l| l.contains(" now ")) {
        let cell = l.split('└').nth(1).unwrap_or(l);
        assert!(cell.contains(" now ") && !cell.contains("┘ now"), "{l}");
    }
}

/// `,` `.` put a cursor on a step: every panel's value line shows the raw values
/// there (the metrics file's), `;` goes back to the latest ones.
#[test]
fn the_step_cursor_shows_the_values_at_its_step() {
    use rmsweb::tui::widgets::chart::fmt_num;
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-synth"));
    press(&mut app, ".");
    assert_eq!(app.shared.message.as_deref(), Some("cursor at step 240"));
    press(&mut app, ",,");
    assert_eq!(app.shared.message.as_deref(), Some("cursor at step 238"));
    let line = std::fs::read_to_string(runs.path().join("rl-synth/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["step"] == 238)
        .unwrap();
    let want = |k: &str| fmt_num(line["data"][k].as_f64().unwrap());
    let s = screen(&mut app);
    let kl = format!("@238 {} · {}", want("actor/ppo_kl"), want("actor/kl_loss"));
    assert!(s.contains(&kl), "{kl}\n{s}");
    assert!(
        s.contains("cursor: step 238"),
        "the info pane says where the cursor is"
    );
    press(&mut app, "<");
    assert_eq!(app.shared.message.as_deref(), Some("cursor at step 214"));
    press(&mut app, ";");
    assert!(screen(&mut app).contains(" now "));
}

/// With smoothing on, the raw curve stays drawn under the smoothed one, dimmed.
#[test]
fn smoothing_keeps_the_raw_curve_under_it() {
    let data = tui::fixtures();
    let runs = runs_folder(&["rl-synth"]);
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-synth"));
    let muted = rmsweb::tui::theme::Theme::default().dim().fg;
    let dim_braille = |b: &ratatui::buffer::Buffer| {
        b.content()
            .iter()
            .filter(|c| {
                c.symbol()
                    .chars()
                    .next()
                    .is_some_and(|ch| ('\u{2801}'..='\u{28ff}').contains(&ch))
                    && c.fg == muted.unwrap()
            })
            .count()
    };
    assert_eq!(dim_braille(&screen_at(&mut app, 120, 40)), 0);
    press(&mut app, "++");
    assert!(dim_braille(&screen_at(&mut app, 120, 40)) > 50);
}

/// `D` with two runs marked shows the `run.toml` keys they set differently, each
/// run's value beside the key; without two runs it says what to do.
#[test]
fn diff_of_two_marked_runs_configs() {
    let data = tui::fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-tiny"]);
    let mut app = open(data.path(), opts(runs.path()));
    press(&mut app, "D");
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap_or("")
            .contains("mark two runs"),
        "{:?}",
        app.shared.message
    );
    assert!(app.views.runs.select_id("sft-tiny"));
    press(&mut app, " ");
    assert!(app.views.runs.select_id("rl-tiny"));
    press(&mut app, " D");
    let s = screen(&mut app);
    assert!(s.contains("run.toml:") && s.contains("keys differ"), "{s}");
    let kind = s
        .lines()
        .find(|l| l.contains("│kind "))
        .expect("the kind row");
    assert!(
        kind.contains("\"sft\"") && kind.contains("\"rl\""),
        "{kind}"
    );
    // A key only one run sets.
    let mode = s
        .lines()
        .find(|l| l.contains("│mode "))
        .expect("the mode row");
    assert!(
        mode.contains("(not set)") && mode.contains("salvage-ds"),
        "{mode}"
    );
    app.handle_key(key(KeyCode::Esc));
    assert!(!screen(&mut app).contains("keys differ"));
}
