//! The keys the workbench answers to: the app's own here, each view's in its own
//! module (`KEYS`), gathered by [`keymap`] for the help overlay.

pub use super::key_help::{KeyHelp, k};

/// Keys the app itself answers, in every tab.
pub const GLOBAL: &[KeyHelp] = &[
    k(
        "Global",
        "1 2 3 4",
        "switch tab: Trajectories, Mined pairs, Reward, Runs",
    ),
    k("Global", "Tab / Shift-Tab", "next / previous pane"),
    k("Global", "?", "show or hide this help"),
    k(
        "Global",
        "/",
        "filter the current list (Enter keeps, Esc clears)",
    ),
    k("Global", "q  Ctrl-C", "quit"),
    k(
        "Mouse",
        "click",
        "tab title · row (again: open, as Enter) · pane · ? help",
    ),
    k(
        "Mouse",
        "wheel",
        "rows and details under the pointer; over charts: step cursor",
    ),
    k("Lists", "j k  ↓ ↑", "next / previous row"),
    k("Lists", "g G  Home End", "first / last row"),
    k("Lists", "PgDn PgUp", "ten rows down / up"),
    k("Lists", "Enter", "open: focus the next pane"),
    k("Lists", "Esc", "back to the list; close a popup"),
];

/// Keys of every text box.
pub const TEXT_BOXES: &[KeyHelp] = &[
    k("Text boxes", "Esc", "leave the box (edits are not saved)"),
    k("Text boxes", "Ctrl-U", "clear the box"),
];

/// The full key map, as the help overlay lists it: the app's keys, then each
/// view's own ([`crate::tui::components::Component::keys`]) in tab order, then the
/// text boxes'.
pub fn keymap() -> Vec<&'static KeyHelp> {
    use crate::tui::components::{curriculum, pairs, reward, runs, trajectories};
    [
        GLOBAL,
        trajectories::KEYS,
        pairs::KEYS,
        reward::KEYS,
        runs::KEYS,
        curriculum::KEYS,
        TEXT_BOXES,
    ]
    .into_iter()
    .flatten()
    .collect()
}
