//! Actions: what a component asks the app to do.

use crate::annotate::Op;
use serde_json::Value;

/// The tab enum from the table of tabs ([`crate::tui::tabs`]).
macro_rules! tab_enum {
    ($($variant:ident, $title:literal, $field:ident: $module:ident::$view:ident;)+) => {
        /// The workbench tabs, in key order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Tab {
            $($variant),+
        }

        impl Tab {
            /// Every tab in order.
            pub const ALL: [Tab; [$(Tab::$variant),+].len()] = [$(Tab::$variant),+];

            /// The title shown in the tab bar.
            pub fn title(self) -> &'static str {
                match self {
                    $(Tab::$variant => $title),+
                }
            }
        }
    };
}
super::tabs::with_tabs!(tab_enum);

/// An effect a component cannot perform alone.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    SwitchTab(Tab),
    ToggleHelp,
    /// Open the filter prompt for the current tab.
    StartFilter,
    /// Append an annotation event on a pair (then refold and mark saved).
    Annotate {
        pair_id: String,
        op: Op,
        value: Value,
        prev: Value,
    },
    /// Show a message in the status bar.
    Message(String),
    /// Browse this run folder's `rollouts.jsonl` in the Reward tab.
    OpenRollouts(std::path::PathBuf),
    /// Show this RL run's curriculum (in place of the Runs tab's panels).
    OpenCurriculum(std::path::PathBuf),
    /// Close the curriculum view.
    CloseCurriculum,
    /// Select the mined pair with this id in the Mined pairs tab.
    ShowPair(String),
}
