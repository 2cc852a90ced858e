//! Every key the workbench answers to, in one table: the help overlay lists it.

/// A key binding as shown in the help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHelp {
    /// Where the key works (`Global`, `Lists`, `Trajectories`, ...).
    pub context: &'static str,
    pub keys: &'static str,
    pub what: &'static str,
}

const fn k(context: &'static str, keys: &'static str, what: &'static str) -> KeyHelp {
    KeyHelp {
        context,
        keys,
        what,
    }
}

/// The full key map.
pub const KEYMAP: &[KeyHelp] = &[
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
    k("Trajectories", "J K", "scroll the step detail"),
    k(
        "Trajectories",
        "z",
        "screenshot view, the step's target drawn on it; h l: steps",
    ),
    k(
        "Mined pairs",
        "a",
        "accept the pair (then the next pending one)",
    ),
    k(
        "Mined pairs",
        "x",
        "reject the pair (then the next pending one)",
    ),
    k(
        "Mined pairs",
        "l then 1-8",
        "relabel: pick a failure-mode category (a decision)",
    ),
    k("Mined pairs", "A", "advance after a decision: on / off"),
    k(
        "Mined pairs",
        "C",
        "agreement per category (κ); Enter: its next conflict",
    ),
    k(
        "Mined pairs",
        "S then a / x",
        "settle a conflict between annotators (accept / reject)",
    ),
    k(
        "Mined pairs",
        "e",
        "edit the target action (Enter saves if valid)",
    ),
    k("Mined pairs", "n", "add a note (Enter saves)"),
    k("Mined pairs", "u", "undo your latest change on this pair"),
    k("Mined pairs", "] [", "next / previous pending pair"),
    k("Mined pairs", "J K", "scroll the pair detail"),
    k(
        "Reward",
        "t",
        "state source: pairs / tab-1 trajectory / opened rollouts",
    ),
    k(
        "Reward",
        "h l  ← →",
        "rollouts: previous / next sample (fills the candidate)",
    ),
    k(
        "Reward",
        "e  i  Enter",
        "type a candidate response (scored live)",
    ),
    k(
        "Runs",
        "n",
        "launch form: kind, preset, dataset, steps, lr, mode, init",
    ),
    k(
        "Runs",
        "s  r  K",
        "stop (SIGTERM) · resume · kill (SIGKILL, asks y/n)",
    ),
    k(
        "Runs",
        "+ -  L  x",
        "EMA smoothing · log scale · x by step / wall time",
    ),
    k(
        "Runs",
        ", .  < >  ;",
        "step cursor (values there): ∓1 step · ∓1/10 run · off",
    ),
    k(
        "Runs",
        "D",
        "diff of two marked runs' run.toml (keys set differently)",
    ),
    k(
        "Runs",
        "Space",
        "mark the run for the overlay of marked runs",
    ),
    k(
        "Runs",
        "o",
        "open the run's rollout groups in the Reward tab",
    ),
    k(
        "Runs",
        "R",
        "recipe report table: task types × policies (recipe folders)",
    ),
    k(
        "Runs",
        "c",
        "curriculum: each mined state's phases over the steps",
    ),
    k(
        "Curriculum",
        "Enter",
        "jump to the state's pair in Mined pairs",
    ),
    k("Curriculum", "Esc", "back to the runs"),
    k("Text boxes", "Esc", "leave the box (edits are not saved)"),
    k("Text boxes", "Ctrl-U", "clear the box"),
];
