//! The workbench's tabs: one row each, in key order (key `1` is the first row). A row
//! names the [`Tab`](crate::tui::action::Tab) variant, the tab bar's title, the
//! field of [`Views`](crate::tui::app::Views) that holds the view, and the view's
//! module (under `tui/components`) and type.
//!
//! A new tab is its view file (a `Default` view implementing
//! [`Component`](crate::tui::components::Component), with its `KEYS`), its `mod` line
//! in `components/mod.rs`, and a row here. The tab enum and titles
//! ([`crate::tui::action`]), the views and the tab-to-view map ([`crate::tui::app`]),
//! and the help's key tables and number keys ([`crate::tui::keys`]) are generated
//! from this table where each is defined: the table itself names no module, so it
//! adds no import arrow.

/// Calls the macro `$then` with the table of tabs.
macro_rules! with_tabs {
    ($then:ident) => {
        $then! {
            Trajectories, "Trajectories", trajectories: trajectories::TrajectoriesView;
            Pairs, "Mined pairs", pairs: pairs::PairsView;
            Reward, "Reward", reward: reward::RewardView;
            Runs, "Runs", runs: runs::RunsView;
        }
    };
}
pub(crate) use with_tabs;
