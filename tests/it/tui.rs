//! The workbench: snapshots of every tab, keystroke flows that read
//! `annotations.jsonl`, the hostile fixture rendered clean, and the real binary
//! driven in tmux (including a SIGKILL mid-session).

use crate::tui_data;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::annotate::{AnnotationEvent, AnnotationLog, Op};
use rmsweb::tui::action::Tab;
use rmsweb::tui::{App, Options, Theme};
use std::path::Path;

/// A fresh copy of the bundled `fixtures/` dataset (live MiniWoB runs, what a first
/// run shows).
pub fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    tui_data::copy_fixtures(dir.path());
    dir
}

/// A fresh copy of the mock-site dataset (`tests/data/mocksites`, the bundled fixtures
/// before they came from MiniWoB): the trajectory and pair snapshots are taken on it.
pub fn mocksites() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    tui_data::copy_mocksites(dir.path());
    dir
}

/// The constructed dataset the keystroke flows run on (known pair ids, a hostile
/// trajectory), as a fresh copy the test may write to.
pub fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    tui_data::build(dir.path());
    dir
}

/// Opens the workbench on `root` as the annotator `tester`, loaded.
pub fn open(root: &Path) -> App {
    let mut app = App::new(Options {
        dataset: root.to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::load("dark").unwrap(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    app
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

/// Presses each character of `keys` as a key.
fn typ(app: &mut App, keys: &str) {
    for c in keys.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

/// Draws one 120×40 frame.
pub fn render(app: &mut App) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    t
}

/// The screen for a snapshot.
fn snap(t: &Terminal<TestBackend>) -> String {
    t.backend().to_string()
}

fn screen(app: &mut App) -> String {
    render(app).backend().to_string()
}

fn events(root: &Path) -> Vec<AnnotationEvent> {
    AnnotationLog::for_dataset(root).read().unwrap()
}

#[test]
fn snapshot_trajectories_tab() {
    let d = mocksites();
    let mut app = open(d.path());
    let t = render(&mut app);
    insta::assert_snapshot!("trajectories", snap(&t));
    // Enter the timeline and move to step 2: the detail follows.
    app.handle_key(key(KeyCode::Enter));
    typ(&mut app, "jj");
    let t = render(&mut app);
    insta::assert_snapshot!("trajectories_step2", snap(&t));
}

#[test]
fn snapshot_pairs_tab_and_popups() {
    let d = mocksites();
    let mut app = open(d.path());
    typ(&mut app, "2");
    insta::assert_snapshot!("pairs", snap(&render(&mut app)));
    typ(&mut app, "l");
    insta::assert_snapshot!("pairs_relabel", snap(&render(&mut app)));
    app.handle_key(key(KeyCode::Esc));
    typ(&mut app, "e");
    insta::assert_snapshot!("pairs_edit", snap(&render(&mut app)));
}

#[test]
fn snapshot_reward_runs_and_help() {
    let d = fixtures();
    let mut app = open(d.path());
    typ(&mut app, "3e");
    typ(&mut app, "click(13)");
    insta::assert_snapshot!("reward", snap(&render(&mut app)));
    app.handle_key(key(KeyCode::Esc));
    typ(&mut app, "4");
    insta::assert_snapshot!("runs", snap(&render(&mut app)));
    typ(&mut app, "?");
    insta::assert_snapshot!("help", snap(&render(&mut app)));
}

#[test]
fn snapshot_miniwob_fixtures_list_retry_and_pair() {
    let d = fixtures();
    let mut app = open(d.path());
    insta::assert_snapshot!("fixtures_trajectories", snap(&render(&mut app)));
    // login-user seed 0: two failed rounds, then a success in round 3 carrying the
    // reflection on round 2.
    typ(&mut app, "jj");
    let s = screen(&mut app);
    assert!(s.contains("login-user-s0-a3 · attempt 3 · round 3"), "{s}");
    assert!(
        s.contains("Reflection: Step 4 called done before the task was"),
        "{s}"
    );
    app.handle_key(key(KeyCode::Enter));
    typ(&mut app, "j");
    insta::assert_snapshot!("fixtures_retry_step1", snap(&render(&mut app)));
    typ(&mut app, "2");
    let t = render(&mut app);
    let first = &app.shared.pairs[0];
    let want = format!("Category: {} (heuristic", first.failure_mode.category);
    assert!(t.backend().to_string().contains(&want), "{}", t.backend());
    insta::assert_snapshot!("fixtures_pair", snap(&t));
}

#[test]
fn help_lists_every_key_of_the_keymap() {
    use rmsweb::tui::action::Tab;
    let d = dataset();
    let mut app = open(d.path());
    for (i, tab) in Tab::ALL.into_iter().enumerate() {
        typ(&mut app, &(i + 1).to_string());
        typ(&mut app, "?");
        // The open tab's keys and the global ones on the first screen.
        let s = screen(&mut app);
        for k in rmsweb::tui::keys::keymap() {
            if k.context == tab.title() || k.context == "Global" {
                assert!(
                    s.contains(k.keys),
                    "{}: help misses `{}`:\n{s}",
                    tab.title(),
                    k.keys
                );
            }
        }
        // Every key by scrolling down.
        let mut seen = s;
        for _ in 0..rmsweb::tui::keys::keymap().len() {
            typ(&mut app, "j");
            seen.push_str(&screen(&mut app));
        }
        for k in rmsweb::tui::keys::keymap() {
            assert!(seen.contains(k.keys), "help never shows `{}`", k.keys);
        }
        typ(&mut app, "?");
        assert!(!screen(&mut app).contains("Keys — ? or Esc closes"));
    }
}

#[test]
fn reward_tab_shows_the_rubric_decision_live() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "3e");
    let target = r#"{"action":[{"input":{"index":2,"text":"hunter2"}}]}"#;
    typ(&mut app, target);
    let pair = app.shared.pairs[0].clone();
    let elements = app
        .shared
        .trajectories
        .by_id(&app.shared.dataset, "login-a1")
        .unwrap()
        .steps[1]
        .state
        .elements
        .clone();
    let d1 = rmsweb::reward::score(target, &pair.target_action, &elements, &Default::default());
    let s = screen(&mut app);
    assert!(s.contains(&format!("Score: {:.2}", d1.score)), "{s}");
    assert!(s.contains(&format!("Rule: {}", d1.rule)), "{s}");
    // One more key changes the candidate and the decision follows it.
    app.handle_key(ctrl('u'));
    typ(&mut app, "nonsense");
    let d2 = rmsweb::reward::score(
        "nonsense",
        &pair.target_action,
        &elements,
        &Default::default(),
    );
    let s = screen(&mut app);
    assert!(s.contains(&format!("Rule: {}", d2.rule)), "{s}");
    assert!(
        s.contains(&format!(
            "Reason: {}",
            d2.reason.chars().take(40).collect::<String>()
        )),
        "{s}"
    );
}

#[test]
fn first_frame_draws_before_the_background_load() {
    let d = dataset();
    let mut app = App::new(Options {
        dataset: d.path().to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::default(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    // Rows are parsed one by one for the visible window, loaded or not.
    let s = screen(&mut app);
    assert!(s.contains("login-a1") || s.contains("login "), "{s}");
    assert!(s.contains("Trajectories 5/5"), "{s}");
    app.wait_loaded();
    assert!(screen(&mut app).contains("Log in as alice"));
}

#[test]
fn accept_then_undo_is_appended_and_folded() {
    let d = dataset();
    let mut app = open(d.path());
    // Stay on the pair after a decision, to undo there.
    typ(&mut app, "2A");
    assert!(screen(&mut app).contains("advance after a decision: off"));
    typ(&mut app, "a");
    let ev = events(d.path());
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].op, ev[0].pair_id.as_str(), ev[0].annotator.as_str()),
        (Op::Accept, "login-s2", "tester")
    );
    assert_eq!(ev[0].prev, serde_json::json!("pending"));
    let s = screen(&mut app);
    assert!(s.contains("saved ") && s.contains("1/3 reviewed"), "{s}");
    assert!(s.contains("Status: accepted (by tester)"), "{s}");
    typ(&mut app, "x");
    assert!(screen(&mut app).contains("Status: rejected"));
    typ(&mut app, "u");
    let ev = events(d.path());
    assert_eq!(ev.len(), 3);
    assert_eq!(ev[2].op, Op::Undo);
    assert_eq!(ev[2].value, serde_json::json!("reject"));
    assert!(screen(&mut app).contains("Status: accepted"));
    typ(&mut app, "uu");
    let ev = events(d.path());
    assert_eq!(
        ev.len(),
        4,
        "a third undo has nothing left to revert and writes nothing"
    );
    let s = screen(&mut app);
    assert!(
        s.contains("Status: pending") && s.contains("0/3 reviewed"),
        "{s}"
    );
    assert!(s.contains("nothing of yours to undo"), "{s}");
}

#[test]
fn relabel_picks_a_category_by_number() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "2Ajl");
    typ(&mut app, "9"); // not a category: the popup stays
    assert!(events(d.path()).is_empty());
    typ(&mut app, "4");
    let ev = events(d.path());
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].op, Op::Relabel);
    assert_eq!(ev[0].pair_id, "search-s2");
    assert_eq!(
        ev[0].value,
        serde_json::json!(rmsweb::mine::pair::DEFAULT_TAXONOMY[3])
    );
    assert_eq!(ev[0].prev, serde_json::json!("missed_constraint"));
    let s = screen(&mut app);
    assert!(
        s.contains("Category: premature_done (annotator, 1.00)"),
        "{s}"
    );
    assert!(
        s.contains("Status: accepted") && s.contains("1/3 reviewed"),
        "a relabel is a decision: {s}"
    );
    // The same category again is no new event; another one is.
    typ(&mut app, "l4");
    let s = screen(&mut app);
    assert!(s.contains("already this category"), "{s}");
    assert_eq!(events(d.path()).len(), 1);
    typ(&mut app, "l5");
    assert_eq!(events(d.path()).len(), 2);
}

#[test]
fn edit_saves_only_a_valid_action() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "2e");
    app.handle_key(ctrl('u'));
    typ(&mut app, "click the thing");
    assert!(screen(&mut app).contains("invalid: "));
    app.handle_key(key(KeyCode::Enter));
    assert!(
        events(d.path()).is_empty(),
        "an invalid target is not saved"
    );
    assert!(screen(&mut app).contains("not saved: "));
    // Parsed but impossible on this page: an index it does not have, an unknown
    // action, a known one without its parameter. Each is refused with its reason.
    for (typed, reason) in [
        ("click(9)", "index 9 is not on this page"),
        (r#"{"name":"fly","params":{}}"#, "unknown action `fly`"),
        (
            r#"{"name":"input","params":{"text":"x"}}"#,
            "`input` needs `index`",
        ),
    ] {
        app.handle_key(ctrl('u'));
        typ(&mut app, typed);
        let s = screen(&mut app);
        assert!(
            s.contains("invalid: ") && s.contains(reason),
            "{typed}: {s}"
        );
        app.handle_key(key(KeyCode::Enter));
        assert!(events(d.path()).is_empty(), "{typed} was saved");
        assert!(screen(&mut app).contains("not saved: "), "{typed}");
    }
    app.handle_key(ctrl('u'));
    typ(
        &mut app,
        r#"{"name":"input","params":{"index":2,"text":"hunter2!"}}"#,
    );
    assert!(screen(&mut app).contains("valid: input(2, \"hunter2!\")"));
    app.handle_key(key(KeyCode::Enter));
    let ev = events(d.path());
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].op, Op::EditTarget);
    assert_eq!(
        ev[0].value,
        serde_json::json!({"name": "input", "params": {"index": 2, "text": "hunter2!"}})
    );
    assert_eq!(
        ev[0].prev,
        serde_json::json!({"name": "input", "params": {"index": 2, "text": "hunter2"}})
    );
    let s = screen(&mut app);
    assert!(
        s.contains("Status: edited") && s.contains("(edited; mined: input(2, \"hunter2\"))"),
        "{s}"
    );
    // A model response is accepted too.
    typ(&mut app, "e");
    app.handle_key(ctrl('u'));
    typ(
        &mut app,
        r#"{"action":[{"click_element_by_index":{"index":3}}]}"#,
    );
    app.handle_key(key(KeyCode::Enter));
    let ev = events(d.path());
    assert_eq!(
        ev[1].value,
        serde_json::json!({"name": "click", "params": {"index": 3}})
    );
    // Esc leaves without saving.
    typ(&mut app, "e");
    typ(&mut app, "xyz");
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(events(d.path()).len(), 2);
}

#[test]
fn notes_and_next_pending() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "2[");
    assert!(
        screen(&mut app).contains("hostile-s0 ·"),
        "[ wraps to the last pending pair"
    );
    typ(&mut app, "g");
    // A decision moves on to the next pending pair.
    typ(&mut app, "a");
    assert!(screen(&mut app).contains("search-s2 ·"), "a advances");
    typ(&mut app, "nindex 7 is the red one");
    app.handle_key(key(KeyCode::Enter));
    let ev = events(d.path());
    assert_eq!(ev.len(), 2);
    assert_eq!((ev[1].op, ev[1].pair_id.as_str()), (Op::Note, "search-s2"));
    assert_eq!(ev[1].value, serde_json::json!("index 7 is the red one"));
    typ(&mut app, "x");
    assert!(screen(&mut app).contains("hostile-s0 ·"), "x advances");
    typ(&mut app, "a");
    // No pending pair left: the cursor stays, `]` says so, and repeating the
    // decision writes nothing.
    assert!(screen(&mut app).contains("hostile-s0 ·"));
    typ(&mut app, "]");
    assert!(screen(&mut app).contains("no pending pair left"));
    typ(&mut app, "a");
    assert!(screen(&mut app).contains("already accepted"));
    assert_eq!(events(d.path()).len(), 4);
}

/// Alice accepted a pair; the tester rejects it: the pair shows the conflict (list,
/// detail, status bar) instead of taking the last word, and `S` settles it.
#[test]
fn disagreeing_annotators_show_a_conflict_that_s_settles() {
    let d = dataset();
    AnnotationLog::for_dataset(d.path())
        .append(&AnnotationEvent::now(
            "alice",
            "login-s2",
            Op::Accept,
            serde_json::Value::Null,
            serde_json::json!("pending"),
        ))
        .unwrap();
    let mut app = open(d.path());
    typ(&mut app, "2S");
    assert!(screen(&mut app).contains("no conflict to settle here"));
    typ(&mut app, "x");
    typ(&mut app, "g");
    let s = screen(&mut app);
    assert!(
        s.contains("≠ login-s2")
            && s.contains("Status: conflict (alice: accept · tester: reject · S settles)")
            && s.contains("≠ 1 in conflict")
            && s.contains("0/3 reviewed"),
        "{s}"
    );
    typ(&mut app, "S");
    assert!(screen(&mut app).contains("Settle the conflict"));
    typ(&mut app, "a");
    let ev = events(d.path());
    assert_eq!(ev.len(), 3);
    assert_eq!(
        (ev[2].op, ev[2].value.clone()),
        (Op::Settle, serde_json::json!("accept"))
    );
    typ(&mut app, "g");
    let s = screen(&mut app);
    assert!(
        s.contains("Status: accepted (settled by tester: accept)")
            && !s.contains("in conflict")
            && s.contains("1/3 reviewed"),
        "{s}"
    );
}

/// Alice and the tester decide the same pairs; `C` shows agreement per category
/// (shared, agreed, conflicts, kappa) at 120×40 and 80×24, Enter goes to the
/// category's open conflict, and settling it moves it to "settled". `annotate
/// agreement` prints the same numbers.
#[test]
fn the_agreement_view_counts_per_category_and_leads_to_the_conflict() {
    let d = dataset();
    let log = AnnotationLog::for_dataset(d.path());
    // The tester agrees on login-s2 (a relabel keeps it) and on search-s2, and
    // rejects hostile-s0, which alice accepted (a conflict).
    for (who, pair, op, value) in [
        ("alice", "login-s2", Op::Accept, None),
        ("alice", "search-s2", Op::Reject, None),
        ("alice", "hostile-s0", Op::Accept, None),
        ("tester", "login-s2", Op::Relabel, Some("missed_constraint")),
        ("tester", "search-s2", Op::Reject, None),
        ("tester", "hostile-s0", Op::Reject, None),
    ] {
        log.append(&AnnotationEvent::now(
            who,
            pair,
            op,
            value.map_or(serde_json::Value::Null, serde_json::Value::from),
            serde_json::json!("pending"),
        ))
        .unwrap();
    }
    let mut app = open(d.path());
    typ(&mut app, "2");
    typ(&mut app, "C");
    let t = render(&mut app);
    let s = snap(&t);
    insta::assert_snapshot!("agreement_view_120x40", s);
    let row = |s: &str, name: &str| -> Vec<String> {
        let l = s
            .lines()
            .skip_while(|l| !l.contains("pairs decided shared"))
            .find(|l| l.contains(&format!("┃{name} ")))
            .unwrap_or_else(|| panic!("no row {name}:\n{s}"));
        let cells: Vec<String> = l
            .split(|c: char| c == '┃' || c.is_whitespace())
            .filter(|c| !c.is_empty() && *c != "\"")
            .map(str::to_string)
            .collect();
        let at = cells.iter().position(|c| c == name).unwrap();
        cells[at + 1..at + 8].to_vec()
    };
    // pairs decided shared agreed conflict settled kappa
    assert_eq!(
        row(&s, "premature_done"),
        ["1", "1", "1", "0", "1", "0", "0.00"]
    );
    // alice keep keep reject, tester keep reject reject: po 2/3, pe 4/9, kappa 0.4.
    assert_eq!(row(&s, "all"), ["3", "3", "3", "2", "1", "0", "0.40"]);
    let mut small = Terminal::new(TestBackend::new(80, 24)).unwrap();
    small.draw(|f| app.draw(f)).unwrap();
    insta::assert_snapshot!("agreement_view_80x24", snap(&small));
    // Enter on the total row: the next conflict, and a hint to settle it.
    app.handle_key(key(KeyCode::Enter));
    let s = screen(&mut app);
    assert!(
        s.contains("┌ hostile-s0 · fail_contrast") && s.contains("│ hostile-s0: S settles"),
        "{s}"
    );
    typ(&mut app, "Sx");
    typ(&mut app, "C");
    let s = screen(&mut app);
    assert_eq!(row(&s, "all")[3..6], ["2", "0", "1"]);
    app.handle_key(key(KeyCode::Esc));
    assert!(!screen(&mut app).contains("Agreement between annotators"));

    let root = d.path().to_str().unwrap();
    let out = crate::annotate::rmsweb(&["annotate", "agreement", "--dataset", root, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = rows.as_array().unwrap().last().unwrap();
    let field = |k: &str| all[k].to_string();
    assert_eq!(
        ["category", "shared", "agreed", "open_conflicts", "settled"].map(field),
        ["\"all\"", "3", "2", "0", "1"]
    );
    let text = crate::annotate::rmsweb(&["annotate", "agreement", "--dataset", root]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("premature_done") && text.contains("kappa"),
        "{text}"
    );
}

#[test]
fn filter_narrows_the_list_and_esc_clears_it() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "/search");
    let s = screen(&mut app);
    assert!(s.contains("Trajectories 2/5"), "{s}");
    app.handle_key(key(KeyCode::Enter));
    assert!(screen(&mut app).contains("filter: search"));
    typ(&mut app, "/");
    app.handle_key(key(KeyCode::Esc));
    assert!(screen(&mut app).contains("Trajectories 5/5"));
    typ(&mut app, "2/hostile");
    app.handle_key(key(KeyCode::Enter));
    assert!(screen(&mut app).contains("Queue 0/3 reviewed"));
    typ(&mut app, "a");
    assert_eq!(events(d.path())[0].pair_id, "hostile-s0");
}

#[test]
fn the_status_bar_keeps_its_help_hint_on_a_narrow_terminal() {
    let d = dataset();
    let mut app = open(d.path());
    typ(
        &mut app,
        "/a filter long enough to fill the status bar of a narrow terminal",
    );
    app.handle_key(key(KeyCode::Enter));
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    let s = t.backend().to_string();
    let last = s.lines().rfind(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.trim_end().trim_end_matches('"').ends_with("? help"),
        "{last}"
    );
    assert!(last.starts_with("\"tui-fixture │"), "{last}");
}

fn assert_clean(t: &Terminal<TestBackend>, what: &str) {
    for cell in t.backend().buffer().content() {
        for c in cell.symbol().chars() {
            assert!(
                !c.is_control()
                    && !('\u{202A}'..='\u{202E}').contains(&c)
                    && !('\u{2066}'..='\u{2069}').contains(&c),
                "{what}: control character {c:?} reached the screen"
            );
        }
    }
}

#[test]
fn hostile_text_is_rendered_clean_in_every_view() {
    let d = dataset();
    let mut app = open(d.path());
    typ(&mut app, "/hostile");
    app.handle_key(key(KeyCode::Enter));
    let t = render(&mut app);
    assert!(
        t.backend().to_string().contains("Evil"),
        "the hostile trajectory is shown"
    );
    assert_clean(&t, "trajectories");
    app.handle_key(key(KeyCode::Enter));
    typ(&mut app, "j");
    assert_clean(&render(&mut app), "trajectories step 1");
    typ(&mut app, "2/hostile");
    app.handle_key(key(KeyCode::Enter));
    assert_clean(&render(&mut app), "pairs");
    typ(&mut app, "e");
    assert_clean(&render(&mut app), "edit box");
    app.handle_key(key(KeyCode::Esc));
    typ(&mut app, "nx");
    app.handle_key(key(KeyCode::Enter));
    typ(&mut app, "3G");
    assert_clean(&render(&mut app), "reward");
    typ(&mut app, "13t");
    assert_eq!(app.tab, Tab::Reward);
    let t = render(&mut app);
    assert!(
        t.backend().to_string().contains("trajectory steps"),
        "{}",
        t.backend()
    );
    assert_clean(&t, "reward from trajectory");
}

#[test]
fn a_failed_append_is_not_shown_as_saved() {
    let d = dataset();
    let mut app = open(d.path());
    // A folder where the log should be: the append cannot succeed.
    std::fs::create_dir(d.path().join("annotations.jsonl")).unwrap();
    typ(&mut app, "2a");
    let s = screen(&mut app);
    assert!(s.contains("NOT SAVED"), "{s}");
    assert!(
        s.contains("0/3 reviewed") && !s.contains("saved 0") && !s.contains("saved 1"),
        "{s}"
    );
}

#[test]
fn two_writers_never_interleave_partial_lines() {
    let d = tempfile::tempdir().unwrap();
    let log = AnnotationLog::for_dataset(d.path());
    let big = "x".repeat(20_000);
    std::thread::scope(|s| {
        for who in ["alice", "bob"] {
            let log = log.clone();
            let big = big.clone();
            s.spawn(move || {
                for i in 0..150 {
                    let ev = AnnotationEvent::now(
                        who,
                        &format!("p{i}"),
                        Op::Note,
                        serde_json::json!(format!("{who}{big}")),
                        serde_json::Value::Null,
                    );
                    log.append(&ev).unwrap();
                }
            });
        }
    });
    let ev = log.read().unwrap();
    assert_eq!(ev.len(), 300);
    for who in ["alice", "bob"] {
        let mine: Vec<_> = ev.iter().filter(|e| e.annotator == who).collect();
        assert_eq!(mine.len(), 150);
        assert!(mine.iter().all(|e| {
            e.value
                .as_str()
                .is_some_and(|v| v.starts_with(who) && v.len() == who.len() + 20_000)
        }));
    }
}

#[test]
fn workbench_reports_bad_options_before_touching_the_terminal() {
    let d = dataset();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "--dataset",
        d.path().to_str().unwrap(),
        "--theme",
        "no-such-theme",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no theme `no-such-theme`"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains('\u{1b}'),
        "the terminal was not touched"
    );
    let out = run(&["--dataset", "/no/such/dataset"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dataset"));
    // Without a terminal: a sentence that names the subcommands to use instead.
    let out = run(&["--dataset", d.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the workbench needs a terminal") && err.contains("rmsweb stats"),
        "{err}"
    );
    // A theme given as a file is read from that file, errors naming it.
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\n").unwrap();
    let out = run(&[
        "--dataset",
        d.path().to_str().unwrap(),
        "--theme",
        bad.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml"));
}

#[test]
fn light_theme_renders_the_same_layout() {
    let d = dataset();
    let mut dark = open(d.path());
    let mut light = open(d.path());
    light.shared.theme = Theme::load("light").unwrap();
    let (a, b) = (render(&mut dark), render(&mut light));
    assert_eq!(a.backend().to_string(), b.backend().to_string());
    assert_ne!(a.backend().buffer(), b.backend().buffer(), "colours differ");
}

/// `z` on a step opens its screenshot over the whole tab with the acted-on element's
/// box drawn on it (magenta) and the steps as a strip; `l`/`h` move along the steps,
/// `z` closes.
#[test]
fn the_screenshot_view_draws_the_target_and_walks_the_steps() {
    let d = fixtures();
    let mut app = open(d.path());
    // login-user seed 0, attempt 1: input(1), input(2), ...
    app.handle_key(key(KeyCode::Enter));
    let plain = render(&mut app);
    typ(&mut app, "z");
    let t = render(&mut app);
    let s = t.backend().to_string();
    assert!(s.contains("step 0 input(1"), "{s}");
    assert!(s.contains("→ [1] <input>"), "{s}");
    assert!(s.contains("z/Esc closes"), "{s}");
    let magenta = |t: &ratatui::Terminal<ratatui::backend::TestBackend>| {
        t.backend()
            .buffer()
            .content()
            .iter()
            .filter(|c| {
                [c.fg, c.bg].iter().any(|col| {
                    matches!(col, ratatui::style::Color::Rgb(r, g, b) if *r > 180 && *g < 90 && *b > 180)
                })
            })
            .count()
    };
    assert!(magenta(&t) > 10, "the target's box is drawn");
    assert!(magenta(&plain) > 0, "the small screenshot marks it too");
    typ(&mut app, "l");
    let s = screen(&mut app);
    assert!(s.contains("step 1 input(2"), "{s}");
    typ(&mut app, "z");
    let s = screen(&mut app);
    assert!(!s.contains("z/Esc closes") && s.contains("Steps ("), "{s}");
    // A mined pair's two screenshots show where each side acts.
    typ(&mut app, "2");
    assert!(
        magenta(&render(&mut app)) > 0,
        "the pair's screenshots are marked"
    );
}
