//! The parser stacks a [`super::Matcher`] holds: one frame per open JSON value.

use crate::model::constrain::NodeId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::model::constrain) enum ObjState {
    Open,
    /// A key was read (`Some(i)`: property i; `None`: an additional key); `:` next.
    Key(Option<u16>),
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::model::constrain) enum ArrState {
    Open,
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::model::constrain) enum Frame {
    /// A value of this node is expected next.
    Value(NodeId),
    /// Inside a string value; `esc`: 0 plain, 1 after `\`, 2..=5 hex digits left + 1,
    /// [`UTF8_PENDING`] + k: k UTF-8 continuation bytes still due.
    Str {
        node: NodeId,
        chars: u32,
        esc: u8,
    },
    /// Inside an object key.
    Key {
        buf: Vec<u8>,
    },
    Num {
        node: NodeId,
        buf: Vec<u8>,
    },
    /// Inside a literal (`true`, an enum member, ...): the bytes still to come.
    Lit {
        rest: Vec<u8>,
    },
    Obj {
        node: NodeId,
        seen: u64,
        st: ObjState,
    },
    Arr {
        node: NodeId,
        count: u32,
        st: ArrState,
    },
}

/// `Frame::Str::esc` above this (up to 8): continuation bytes of a UTF-8 character are due.
pub(super) const UTF8_PENDING: u8 = 5;

/// `Frame::Str::esc` after `\uD`: the next hex digit must keep it off the surrogates.
pub(super) const SURROGATE_GUARD: u8 = 9;

/// `Frame::Str::esc` after the UTF-8 leads E0, ED, F0, F4 (their second byte's range
/// is narrower).
pub(super) const UTF8_E0: u8 = 10;
pub(super) const UTF8_ED: u8 = 11;
pub(super) const UTF8_F0: u8 = 12;
pub(super) const UTF8_F4: u8 = 13;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::model::constrain) struct Stack {
    pub(in crate::model::constrain) frames: Vec<Frame>,
    pub(in crate::model::constrain) ws: u8,
}
