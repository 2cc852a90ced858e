//! Every tab of the workbench at 200×50 and at 80×24 (the smallest terminal it is
//! laid out for), on the bundled fixtures with the bundled runs: what a newcomer sees
//! first, kept as snapshots.

use crate::runs_tab::{open, opts, runs_folder};
use crate::tui::fixtures;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use rmsweb::tui::action::{Action, Tab};

#[test]
fn every_tab_at_200x50_and_80x24() {
    let data = fixtures();
    let runs = runs_folder(&["sft-tiny", "rl-tiny"]);
    let mut app = open(data.path(), opts(runs.path()));
    assert!(app.views.runs.select_id("rl-tiny"));
    // The runs folder's temporary name, as a placeholder of the same width so the
    // layout around it does not move.
    let path = runs.path().display().to_string();
    let placeholder = format!("{:<w$}", "<runs>", w = path.chars().count());
    for tab in Tab::ALL {
        app.update(Action::SwitchTab(tab));
        for (w, h) in [(200, 50), (80, 24)] {
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            t.draw(|f| app.draw(f)).unwrap();
            let screen = t.backend().to_string().replace(&path, &placeholder);
            let name = format!("{}_{w}x{h}", tab.title().replace(' ', "_").to_lowercase());
            insta::assert_snapshot!(name, screen);
        }
    }
}
