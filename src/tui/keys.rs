//! The keys the workbench answers to: the app's own here, each view's in its own
//! module (`KEYS`), gathered by [`keymap`] for the help overlay.

use super::action::Tab;
pub use super::key_help::{KeyHelp, k};
use std::sync::LazyLock;

/// The number keys: a digit per tab, and the tabs' titles (from the table of tabs).
static SWITCH: LazyLock<KeyHelp> = LazyLock::new(|| {
    let digits: Vec<String> = (1..=Tab::ALL.len()).map(|d| d.to_string()).collect();
    let titles = format!("switch tab: {}", Tab::ALL.map(Tab::title).join(", "));
    // Built once per process; key tables hold `&'static str`.
    k("Global", digits.join(" ").leak(), titles.leak())
});

/// Each tab's own key table, in tab order, from the table of tabs
/// ([`crate::tui::tabs`]).
macro_rules! tab_keys {
    ($($variant:ident, $title:literal, $field:ident: $module:ident::$view:ident;)+) => {
        const TAB_KEYS: &[&[KeyHelp]] = &[$(crate::tui::components::$module::KEYS),+];
    };
}
super::tabs::with_tabs!(tab_keys);

/// Keys the app itself answers, in every tab (after the number keys).
pub const GLOBAL: &[KeyHelp] = &[
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
    let views = TAB_KEYS
        .iter()
        .copied()
        .chain([crate::tui::components::curriculum::KEYS]);
    std::iter::once(&*SWITCH)
        .chain(
            std::iter::once(GLOBAL)
                .chain(views)
                .chain([TEXT_BOXES])
                .flatten(),
        )
        .collect()
}

/// Whether `k` is one of the app's own keys (the number keys, [`GLOBAL`],
/// [`TEXT_BOXES`]) rather than a view's.
pub fn is_app_key(k: &KeyHelp) -> bool {
    *k == *SWITCH || GLOBAL.contains(k) || TEXT_BOXES.contains(k)
}
