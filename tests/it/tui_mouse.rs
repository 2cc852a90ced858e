//! The mouse in the workbench: clicks on tab titles, `? help`, rows and panes, and
//! the wheel over lists, the step detail, the help and the charts, on frames drawn
//! into `TestBackend` (the real binary is driven in tmux in `tui_tmux`).

use crate::tui::{dataset, fixtures, open, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use rmsweb::tui::App;
use rmsweb::tui::action::Tab;
use rmsweb::tui::components::trajectories::Focus;

/// Column and row of the first cell of `needle` on the screen.
pub fn find(t: &Terminal<TestBackend>, needle: &str) -> (u16, u16) {
    let buf = t.backend().buffer();
    for y in 0..buf.area.height {
        let cells: Vec<&str> = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        let text: String = cells.concat();
        if let Some(byte) = text.find(needle) {
            let mut seen = 0;
            for (x, c) in cells.iter().enumerate() {
                if seen >= byte {
                    return (x as u16, y);
                }
                seen += c.len();
            }
        }
    }
    panic!("`{needle}` is not on the screen:\n{}", t.backend());
}

fn mouse(kind: MouseEventKind, (column, row): (u16, u16)) -> MouseEvent {
    MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

/// Clicks where `needle` is drawn on the current frame.
pub fn click_on(app: &mut App, needle: &str) {
    let at = find(&render(app), needle);
    app.handle_mouse(mouse(MouseEventKind::Down(MouseButton::Left), at));
}

/// Turns the wheel `n` notches down (or up) over where `needle` is drawn.
pub fn wheel_over(app: &mut App, needle: &str, down: bool, n: usize) {
    let at = find(&render(app), needle);
    let kind = if down {
        MouseEventKind::ScrollDown
    } else {
        MouseEventKind::ScrollUp
    };
    for _ in 0..n {
        app.handle_mouse(mouse(kind, at));
    }
}

fn screen(app: &mut App) -> String {
    render(app).backend().to_string()
}

#[test]
fn tabs_help_rows_and_panes_answer_the_mouse() {
    let d = dataset();
    let mut app = open(d.path());
    // A tab title switches tabs; `? help` opens the help, the wheel scrolls it and
    // a click closes it.
    click_on(&mut app, "2 Mined pairs");
    assert_eq!(app.tab, Tab::Pairs);
    click_on(&mut app, "? help");
    assert!(app.help);
    let top = screen(&mut app);
    wheel_over(&mut app, "Global", true, 3);
    assert_ne!(screen(&mut app), top, "the wheel scrolls the help");
    click_on(&mut app, "2 Mined pairs");
    assert!(!app.help && app.tab == Tab::Pairs);

    // Mined pairs: a click selects a pair, the wheel moves through the queue.
    click_on(&mut app, "hostile-s0 ");
    assert!(screen(&mut app).contains("┌ hostile-s0 · fail_contrast"));
    wheel_over(&mut app, "login-s2 ", false, 5);
    assert!(screen(&mut app).contains("┌ login-s2 · fail_contrast"));
    // A click changes nothing while a popup has the keyboard.
    app.handle_key(ratatui::crossterm::event::KeyEvent::from(
        ratatui::crossterm::event::KeyCode::Char('C'),
    ));
    click_on(&mut app, "hostile-s0 ");
    assert!(screen(&mut app).contains("┌ login-s2 · fail_contrast"));

    // Trajectories: a click selects a row and focuses the list; a click on the
    // selected row opens it (focus on the steps, as Enter); a click on a step
    // selects it; the wheel over the detail scrolls it.
    click_on(&mut app, "1 Trajectories");
    assert_eq!(app.tab, Tab::Trajectories);
    click_on(&mut app, "✗ search");
    let s = screen(&mut app);
    assert!(s.contains("search-a2 · attempt"), "{s}");
    assert_eq!(app.views.trajectories.focus, Focus::List);
    click_on(&mut app, "✗ search");
    assert_eq!(app.views.trajectories.focus, Focus::Steps);
    let t = render(&mut app);
    let (x, y) = find(&t, "Steps (");
    app.handle_mouse(mouse(MouseEventKind::Down(MouseButton::Left), (x, y + 3)));
    assert_eq!(app.views.trajectories.steps.selected, 2);
    assert!(screen(&mut app).contains("Step 2"));
    let before = app.views.trajectories.detail_scroll;
    wheel_over(&mut app, "Step 2", true, 2);
    assert_eq!(app.views.trajectories.focus, Focus::Detail);
    assert_eq!(app.views.trajectories.detail_scroll, before + 2);
}

/// The bundled RL run was trained on the bundled fixtures: in the Runs tab a click
/// selects it, the wheel over the charts moves the step cursor, and in its
/// curriculum a click on a state then a second click lands on that mined pair.
#[test]
fn runs_charts_and_the_curriculum_answer_the_mouse() {
    let data = fixtures();
    let runs = crate::runs_tab::runs_folder(&["sft-tiny", "rl-tiny"]);
    let mut app = crate::runs_tab::open(data.path(), crate::runs_tab::opts(runs.path()));
    assert!(app.views.runs.select_id("sft-tiny"));
    click_on(&mut app, "rl-tiny");
    let s = screen(&mut app);
    assert!(s.contains("┌ gates"), "the RL run's panels: {s}");
    assert!(app.views.runs.select_id("rl-tiny"), "still selected");
    let t = render(&mut app);
    let (x, y) = find(&t, "┌ gates");
    app.handle_mouse(mouse(MouseEventKind::ScrollDown, (x, y + 2)));
    let msg = app.shared.message.clone().unwrap_or_default();
    assert!(msg.starts_with("cursor at step"), "{msg:?}");

    app.handle_key(ratatui::crossterm::event::KeyEvent::from(
        ratatui::crossterm::event::KeyCode::Char('c'),
    ));
    let first = app
        .curriculum
        .as_ref()
        .and_then(|c| c.selected())
        .map(|s| s.prompt_id.clone())
        .expect("the curriculum opens on its first state");
    // The states start under the pane's title and its two legend lines.
    let (x, title) = find(&render(&mut app), "Curriculum ");
    let (x, y) = (x + 2, title + 3);
    // The row under the first: selected by the first click, opened by the second.
    app.handle_mouse(mouse(MouseEventKind::Down(MouseButton::Left), (x, y + 1)));
    let second = app
        .curriculum
        .as_ref()
        .and_then(|c| c.selected())
        .map(|s| s.prompt_id.clone())
        .unwrap();
    assert_ne!(second, first);
    app.handle_mouse(mouse(MouseEventKind::Down(MouseButton::Left), (x, y + 1)));
    assert_eq!(app.tab, Tab::Pairs, "{:?}", app.shared.message);
    let pair = app.views.pairs.selected(&app.shared).map(|p| p.id.clone());
    assert_eq!(pair.as_deref(), Some(second.as_str()));
}
