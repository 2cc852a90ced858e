//! One byte applied to one parser stack: the stacks it may become (none when the
//! byte cannot come here), by the kind of the top frame.

use super::string::{StrByte, string_byte};
use super::{ArrState, Frame, Matcher, ObjState, Stack, is_ws};
use crate::model::constrain::{MAX_NUMBER, MAX_WHITESPACE, Node, NodeId, numbers};

impl Matcher {
    /// Pushes onto `out` every stack `s` may become after byte `b`.
    pub(super) fn step(&self, mut s: Stack, b: u8, out: &mut Vec<Stack>) {
        let ws = is_ws(b);
        let Some(top) = s.frames.last().cloned() else {
            // The value is whole: only whitespace may follow.
            if ws && s.ws < MAX_WHITESPACE {
                s.ws += 1;
                out.push(s);
            }
            return;
        };
        // Whitespace between tokens (bounded, so a model cannot pad forever).
        let between_tokens = matches!(top, Frame::Value(_) | Frame::Obj { .. } | Frame::Arr { .. });
        if between_tokens && ws {
            if s.ws < MAX_WHITESPACE {
                s.ws += 1;
                out.push(s);
            }
            return;
        }
        match top {
            Frame::Value(node) => {
                s.ws = 0;
                s.frames.pop();
                self.start_value(s, node, b, out);
            }
            Frame::Str { node, chars, esc } => self.step_string(s, node, chars, esc, b, out),
            Frame::Key { buf } => self.step_key(s, buf, b, out),
            Frame::Num { node, buf } => self.step_number(s, node, buf, b, out),
            Frame::Lit { mut rest } => {
                if rest.first() == Some(&b) {
                    rest.remove(0);
                    if rest.is_empty() {
                        s.frames.pop();
                        if self.completed(&mut s) {
                            out.push(s);
                        }
                    } else {
                        *s.frames.last_mut().expect("top") = Frame::Lit { rest };
                        out.push(s);
                    }
                }
            }
            Frame::Obj { node, seen, st } => {
                s.ws = 0;
                self.step_object(s, node, seen, st, b, out);
            }
            Frame::Arr { node, count, st } => {
                s.ws = 0;
                self.step_array(s, node, count, st, b, out);
            }
        }
    }

    fn step_string(
        &self,
        mut s: Stack,
        node: NodeId,
        chars: u32,
        esc: u8,
        b: u8,
        out: &mut Vec<Stack>,
    ) {
        let (min, max) = match self.node(node) {
            Node::String { min_len, max_len } => (*min_len, *max_len),
            _ => (0, None),
        };
        match string_byte(chars, esc, b, min, max) {
            StrByte::Refused => {}
            StrByte::Closed => {
                s.frames.pop();
                if self.completed(&mut s) {
                    out.push(s);
                }
            }
            StrByte::Next { chars, esc } => {
                *s.frames.last_mut().expect("top") = Frame::Str { node, chars, esc };
                out.push(s);
            }
        }
    }

    /// A byte of an object key: the closing quote (a declared key not yet seen, or
    /// any other where the object takes additional keys), or one more byte that keeps
    /// the key a prefix of one it may still be.
    fn step_key(&self, mut s: Stack, mut buf: Vec<u8>, b: u8, out: &mut Vec<Stack>) {
        let n = s.frames.len();
        let Some(Frame::Obj { node, seen, .. }) = s.frames.get(n - 2).cloned() else {
            return;
        };
        let Node::Object {
            props, additional, ..
        } = self.node(node)
        else {
            return;
        };
        if b == b'"' {
            let found = props
                .iter()
                .enumerate()
                .find(|(i, (k, _))| seen & (1 << i) == 0 && k.as_bytes() == buf.as_slice())
                .map(|(i, _)| i as u16);
            let known = props.iter().any(|(k, _)| k.as_bytes() == buf.as_slice());
            let key = match (found, additional) {
                (Some(i), _) => Some(i),
                (None, Some(_)) if !known => None,
                _ => return,
            };
            s.frames.pop();
            if let Some(Frame::Obj { seen, st, .. }) = s.frames.last_mut() {
                if let Some(i) = key {
                    *seen |= 1 << i;
                }
                *st = ObjState::Key(key);
            }
            out.push(s);
            return;
        }
        if b == b'\\' || b < 0x20 {
            return;
        }
        buf.push(b);
        let prefix_ok = additional.is_some()
            || props
                .iter()
                .enumerate()
                .any(|(i, (k, _))| seen & (1 << i) == 0 && k.as_bytes().starts_with(&buf));
        if prefix_ok {
            *s.frames.last_mut().expect("top") = Frame::Key { buf };
            out.push(s);
        }
    }

    /// A byte after a number's digits so far: one more of them (while the number
    /// can still land in range), and, when the number is already whole, the
    /// parent's next byte.
    fn step_number(
        &self,
        mut s: Stack,
        node: NodeId,
        mut buf: Vec<u8>,
        b: u8,
        out: &mut Vec<Stack>,
    ) {
        let int = matches!(self.node(node), Node::Integer { .. });
        let mut longer = buf.clone();
        longer.push(b);
        if longer.len() <= MAX_NUMBER
            && numbers::is_prefix(&longer, int)
            && numbers::in_reach(self.node(node), &longer)
        {
            *s.frames.last_mut().expect("top") = Frame::Num { node, buf: longer };
            out.push(s.clone());
        }
        // The byte may also end the number and belong to the parent.
        if self.number_complete(node, &buf) {
            buf.clear();
            s.frames.pop();
            if self.completed(&mut s) {
                self.step(s, b, out);
            }
        }
    }

    /// An object's punctuation: a key's opening quote, `}`, `,` and the `:` before a
    /// value.
    fn step_object(
        &self,
        mut s: Stack,
        node: NodeId,
        seen: u64,
        st: ObjState,
        b: u8,
        out: &mut Vec<Stack>,
    ) {
        let set = |s: &mut Stack, st2: ObjState| {
            if let Some(Frame::Obj { st, .. }) = s.frames.last_mut() {
                *st = st2;
            }
        };
        match (st, b) {
            (ObjState::Open | ObjState::Comma, b'"') if self.object_open(node, seen) => {
                s.frames.push(Frame::Key { buf: Vec::new() });
                out.push(s);
            }
            (ObjState::Open | ObjState::AfterValue, b'}') if self.object_done(node, seen) => {
                s.frames.pop();
                if self.completed(&mut s) {
                    out.push(s);
                }
            }
            (ObjState::AfterValue, b',') if self.object_open(node, seen) => {
                set(&mut s, ObjState::Comma);
                out.push(s);
            }
            (ObjState::Key(k), b':') => {
                let child = match self.node(node) {
                    Node::Object {
                        props, additional, ..
                    } => match k {
                        Some(i) => props[i as usize].1,
                        None => additional.unwrap_or(0),
                    },
                    _ => 0,
                };
                set(&mut s, ObjState::InValue);
                s.frames.push(Frame::Value(child));
                out.push(s);
            }
            _ => {}
        }
    }

    /// An array's punctuation (`]`, `,`) or the first byte of its next item.
    fn step_array(
        &self,
        mut s: Stack,
        node: NodeId,
        count: u32,
        st: ArrState,
        b: u8,
        out: &mut Vec<Stack>,
    ) {
        let (items, min, max) = match self.node(node) {
            Node::Array { items, min, max } => (*items, *min, *max),
            _ => (0, 0, None),
        };
        let set = |s: &mut Stack, st2: ArrState| {
            if let Some(Frame::Arr { st, .. }) = s.frames.last_mut() {
                *st = st2;
            }
        };
        match (st, b) {
            (ArrState::Open | ArrState::AfterValue, b']') if count as usize >= min => {
                s.frames.pop();
                if self.completed(&mut s) {
                    out.push(s);
                }
            }
            (ArrState::AfterValue, b',') if max.is_none_or(|m| (count as usize) < m) => {
                set(&mut s, ArrState::Comma);
                out.push(s);
            }
            (ArrState::Open | ArrState::Comma, _) => {
                if st == ArrState::Open && max == Some(0) {
                    return;
                }
                set(&mut s, ArrState::InValue);
                self.start_value(s, items, b, out);
            }
            _ => {}
        }
    }
}
