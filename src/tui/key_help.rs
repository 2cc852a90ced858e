//! One key binding as the help overlay shows it, and the constructor the views'
//! key tables use.

/// A key binding as shown in the help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHelp {
    /// Where the key works (`Global`, `Lists`, `Trajectories`, ...).
    pub context: &'static str,
    pub keys: &'static str,
    pub what: &'static str,
}

/// A key binding (for the key tables of the views).
pub const fn k(context: &'static str, keys: &'static str, what: &'static str) -> KeyHelp {
    KeyHelp {
        context,
        keys,
        what,
    }
}
