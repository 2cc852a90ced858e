//! Actions: what a component asks the app to do.

use crate::annotate::Op;
use serde_json::Value;

/// The workbench tabs, in key order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tab {
    Trajectories,
    Pairs,
    Reward,
    Runs,
}

impl Tab {
    /// Every tab in order.
    pub const ALL: [Tab; 4] = [Tab::Trajectories, Tab::Pairs, Tab::Reward, Tab::Runs];

    /// The title shown in the tab bar.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Trajectories => "Trajectories",
            Tab::Pairs => "Mined pairs",
            Tab::Reward => "Reward",
            Tab::Runs => "Runs",
        }
    }
}

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
