//! A value's first byte: which frame it opens for each alternative of its node.

use super::{ArrState, Frame, Matcher, ObjState, Stack};
use crate::model::constrain::{ANY_ARRAY, ANY_OBJECT, Node, NodeId, numbers};

impl Matcher {
    /// Starts a value of `node` with byte `b` (not whitespace).
    // Kept whole: one short arm per kind of schema node, read side by side.
    pub(super) fn start_value(&self, mut s: Stack, node: NodeId, b: u8, out: &mut Vec<Stack>) {
        match self.node(node) {
            Node::AnyOf(alts) => {
                for &a in alts {
                    self.start_value(s.clone(), a, b, out);
                }
            }
            Node::Pending => {}
            Node::Any => {
                if let Some(f) = any_frame(node, b) {
                    self.push_started(s, f, out);
                }
            }
            Node::Null | Node::Bool => {
                let lits: &[&[u8]] = if matches!(self.node(node), Node::Null) {
                    &[b"null"]
                } else {
                    &[b"true", b"false"]
                };
                for l in lits {
                    if l[0] == b {
                        self.push_started(
                            s.clone(),
                            Frame::Lit {
                                rest: l[1..].to_vec(),
                            },
                            out,
                        );
                    }
                }
            }
            Node::Literals(lits) => {
                for l in lits {
                    if l.first() == Some(&b) {
                        self.push_started(
                            s.clone(),
                            Frame::Lit {
                                rest: l[1..].to_vec(),
                            },
                            out,
                        );
                    }
                }
            }
            Node::Integer { min, .. } | Node::Number { min, .. } => {
                let negative_ok = min.is_none_or(|m| m < 0.0);
                if (b.is_ascii_digit() && numbers::in_reach(self.node(node), &[b]))
                    || (b == b'-' && negative_ok)
                {
                    s.frames.push(Frame::Num { node, buf: vec![b] });
                    out.push(s);
                }
            }
            Node::String { .. } => {
                if b == b'"' {
                    s.frames.push(Frame::Str {
                        node,
                        chars: 0,
                        esc: 0,
                    });
                    out.push(s);
                }
            }
            Node::Object { .. } => {
                if b == b'{' {
                    s.frames.push(Frame::Obj {
                        node,
                        seen: 0,
                        st: ObjState::Open,
                    });
                    out.push(s);
                }
            }
            Node::Array { .. } => {
                if b == b'[' {
                    s.frames.push(Frame::Arr {
                        node,
                        count: 0,
                        st: ArrState::Open,
                    });
                    out.push(s);
                }
            }
        }
    }

    /// Pushes a frame that consumed the first byte; a literal that is already
    /// complete (one byte long) completes at once.
    pub(super) fn push_started(&self, mut s: Stack, f: Frame, out: &mut Vec<Stack>) {
        if let Frame::Lit { rest } = &f
            && rest.is_empty()
        {
            if self.completed(&mut s) {
                out.push(s);
            }
            return;
        }
        s.frames.push(f);
        out.push(s);
    }
}

/// The frame any JSON value opens with byte `b` (strings keep `node`, containers
/// take the unconstrained object and array nodes); `None` when no value starts so.
fn any_frame(node: NodeId, b: u8) -> Option<Frame> {
    match b {
        b'"' => Some(Frame::Str {
            node,
            chars: 0,
            esc: 0,
        }),
        b'{' => Some(Frame::Obj {
            node: ANY_OBJECT,
            seen: 0,
            st: ObjState::Open,
        }),
        b'[' => Some(Frame::Arr {
            node: ANY_ARRAY,
            count: 0,
            st: ArrState::Open,
        }),
        b'-' | b'0'..=b'9' => Some(Frame::Num { node, buf: vec![b] }),
        b't' => Some(Frame::Lit {
            rest: b"rue".to_vec(),
        }),
        b'f' => Some(Frame::Lit {
            rest: b"alse".to_vec(),
        }),
        b'n' => Some(Frame::Lit {
            rest: b"ull".to_vec(),
        }),
        _ => None,
    }
}
