//! The incremental byte-level matcher of a compiled [`Schema`].

use super::{
    ANY_ARRAY, ANY_OBJECT, MAX_NUMBER, MAX_STACKS, MAX_WHITESPACE, Node, NodeId, Schema, numbers,
};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum ObjState {
    Open,
    /// A key was read (`Some(i)`: property i; `None`: an additional key); `:` next.
    Key(Option<u16>),
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum ArrState {
    Open,
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Frame {
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
const UTF8_PENDING: u8 = 5;

/// `Frame::Str::esc` after `\uD`: the next hex digit must keep it off the surrogates.
const SURROGATE_GUARD: u8 = 9;

/// `Frame::Str::esc` after the UTF-8 leads E0, ED, F0, F4 (their second byte's range
/// is narrower).
const UTF8_E0: u8 = 10;
const UTF8_ED: u8 = 11;
const UTF8_F0: u8 = 12;
const UTF8_F4: u8 = 13;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Stack {
    pub(super) frames: Vec<Frame>,
    pub(super) ws: u8,
}

/// The state of constrained decoding after some output bytes.
#[derive(Debug, Clone)]
pub struct Matcher {
    schema: Arc<Schema>,
    stacks: Vec<Stack>,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

impl Matcher {
    /// A matcher with one parser stack.
    pub(super) fn start(schema: Arc<Schema>, stack: Stack) -> Matcher {
        Matcher {
            schema,
            stacks: vec![stack],
        }
    }

    /// Feeds output bytes; false (and the matcher unchanged) when they cannot be
    /// part of an accepted value.
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        match self.after(bytes) {
            Some(next) => {
                *self = next;
                true
            }
            None => false,
        }
    }

    /// The matcher after `bytes`, if they keep the output acceptable.
    pub fn after(&self, bytes: &[u8]) -> Option<Matcher> {
        let mut stacks = self.stacks.clone();
        for &b in bytes {
            let mut next = Vec::new();
            for s in stacks {
                self.step(s, b, &mut next);
            }
            if next.is_empty() {
                return None;
            }
            if next.len() > 1 {
                // Sorted, not hashed: no stack is cloned (the order of the stacks
                // does not change what the matcher accepts).
                next.sort_unstable();
                next.dedup();
                next.truncate(MAX_STACKS);
            }
            stacks = next;
        }
        Some(Matcher {
            schema: Arc::clone(&self.schema),
            stacks,
        })
    }

    /// Which bytes the output may continue with: a token whose first byte is not one
    /// of them is not allowed (a cheap filter before [`Self::allows_token`] when a
    /// whole vocabulary is searched).
    pub fn next_bytes(&self) -> [bool; 256] {
        let mut ok = [false; 256];
        for (b, o) in ok.iter_mut().enumerate() {
            *o = self.after(&[b as u8]).is_some();
        }
        ok
    }

    /// [`Self::allows_token`] that first looks up the token's first byte in
    /// `next_bytes` ([`Self::next_bytes`], computed on first use).
    pub fn allows_token_filtered(
        &self,
        t: u32,
        token_bytes: &[Option<Vec<u8>>],
        stop: &[u32],
        next_bytes: &std::cell::OnceCell<[bool; 256]>,
    ) -> bool {
        if !stop.contains(&t)
            && let Some(Some(&first)) = token_bytes
                .get(t as usize)
                .map(|b| b.as_ref().and_then(|b| b.first()))
            && !next_bytes.get_or_init(|| self.next_bytes())[first as usize]
        {
            return false;
        }
        self.allows_token(t, token_bytes, stop)
    }

    /// Whether token `t` may come next: a `stop` token once the value is whole, any
    /// other token when its raw bytes (`token_bytes`, see
    /// [`super::token_bytes`]) keep the output acceptable.
    pub fn allows_token(&self, t: u32, token_bytes: &[Option<Vec<u8>>], stop: &[u32]) -> bool {
        if stop.contains(&t) {
            return self.can_finish();
        }
        match token_bytes.get(t as usize).and_then(Option::as_ref) {
            Some(b) => self.after(b).is_some(),
            None => false,
        }
    }

    /// Whether the output so far is a whole accepted value (the model may stop).
    pub fn can_finish(&self) -> bool {
        self.stacks.iter().any(|s| {
            let mut s = s.clone();
            // A number at the end completes when the output ends.
            while let Some(Frame::Num { node, buf }) = s.frames.last().cloned() {
                if !self.number_complete(node, &buf) {
                    return false;
                }
                s.frames.pop();
                if !self.completed(&mut s) {
                    return false;
                }
            }
            s.frames.is_empty()
        })
    }

    /// The parser stacks: two matchers with equal stacks accept the same futures.
    pub(super) fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    /// Whether the output is finished and nothing but whitespace may follow.
    pub fn is_done(&self) -> bool {
        self.stacks.iter().all(|s| s.frames.is_empty())
    }

    pub(super) fn node(&self, id: NodeId) -> &Node {
        self.schema.get(id)
    }

    pub(super) fn number_complete(&self, node: NodeId, buf: &[u8]) -> bool {
        numbers::complete(self.node(node), buf)
    }

    /// Pops finished frames' effects into their parents after a value completed;
    /// false if the parent cannot take it.
    fn completed(&self, s: &mut Stack) -> bool {
        match s.frames.last_mut() {
            None => true,
            Some(Frame::Obj { st, .. }) if *st == ObjState::InValue => {
                *st = ObjState::AfterValue;
                true
            }
            Some(Frame::Arr { st, count, .. }) if *st == ArrState::InValue => {
                *st = ArrState::AfterValue;
                *count += 1;
                true
            }
            _ => false,
        }
    }

    /// Starts a value of `node` with byte `b` (not whitespace).
    fn start_value(&self, mut s: Stack, node: NodeId, b: u8, out: &mut Vec<Stack>) {
        match self.node(node) {
            Node::AnyOf(alts) => {
                for &a in alts {
                    self.start_value(s.clone(), a, b, out);
                }
            }
            Node::Pending => {}
            Node::Any => {
                let n = match b {
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
                };
                if let Some(f) = n {
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
    fn push_started(&self, mut s: Stack, f: Frame, out: &mut Vec<Stack>) {
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

    fn object_done(&self, node: NodeId, seen: u64) -> bool {
        match self.node(node) {
            Node::Object { required, .. } => required
                .iter()
                .enumerate()
                .all(|(i, r)| !*r || seen & (1 << i) != 0),
            _ => true,
        }
    }

    /// Whether another key may still come.
    fn object_open(&self, node: NodeId, seen: u64) -> bool {
        match self.node(node) {
            Node::Object {
                props, additional, ..
            } => additional.is_some() || (0..props.len()).any(|i| seen & (1 << i) == 0),
            _ => true,
        }
    }

    fn step(&self, mut s: Stack, b: u8, out: &mut Vec<Stack>) {
        let ws = is_ws(b);
        let Some(top) = s.frames.last().cloned() else {
            if ws && s.ws < MAX_WHITESPACE {
                s.ws += 1;
                out.push(s);
            }
            return;
        };
        let structural_ws = |s: &mut Stack, out: &mut Vec<Stack>| {
            if s.ws < MAX_WHITESPACE {
                s.ws += 1;
                out.push(s.clone());
            }
        };
        match top {
            Frame::Value(node) => {
                if ws {
                    structural_ws(&mut s, out);
                    return;
                }
                s.ws = 0;
                s.frames.pop();
                self.start_value(s, node, b, out);
            }
            Frame::Str { node, chars, esc } => {
                let max = match self.node(node) {
                    Node::String { max_len, .. } => *max_len,
                    _ => None,
                };
                let min = match self.node(node) {
                    Node::String { min_len, .. } => *min_len,
                    _ => 0,
                };
                let new = match esc {
                    0 => match b {
                        b'"' => {
                            if (chars as usize) < min {
                                return;
                            }
                            s.frames.pop();
                            if self.completed(&mut s) {
                                out.push(s);
                            }
                            return;
                        }
                        b'\\' => {
                            // An escape is one more character: refuse it at once
                            // when the string is full.
                            if max.is_some_and(|m| chars as usize + 1 > m) {
                                return;
                            }
                            Frame::Str {
                                node,
                                chars,
                                esc: 1,
                            }
                        }
                        0..=0x1f => return,
                        _ => {
                            // A character starts: ASCII, or a UTF-8 lead byte whose
                            // continuation bytes must follow (a stray continuation
                            // byte or an invalid lead is refused).
                            let pending = match b {
                                0x20..=0x7f => 0,
                                0xc2..=0xdf => 1,
                                // Leads whose second byte has a narrower range
                                // (no overlong forms, surrogates or > U+10FFFF).
                                0xe0 => UTF8_E0 - UTF8_PENDING,
                                0xed => UTF8_ED - UTF8_PENDING,
                                0xf0 => UTF8_F0 - UTF8_PENDING,
                                0xf4 => UTF8_F4 - UTF8_PENDING,
                                0xe1..=0xef => 2,
                                0xf1..=0xf3 => 3,
                                _ => return,
                            };
                            let chars = chars + 1;
                            if max.is_some_and(|m| chars as usize > m) {
                                return;
                            }
                            Frame::Str {
                                node,
                                chars,
                                esc: if pending == 0 {
                                    0
                                } else {
                                    UTF8_PENDING + pending
                                },
                            }
                        }
                    },
                    SURROGATE_GUARD => {
                        // `\uD` + 8..F would be a surrogate, which JSON parsers refuse alone.
                        if !(b'0'..=b'7').contains(&b) {
                            return;
                        }
                        Frame::Str {
                            node,
                            chars,
                            esc: 3,
                        }
                    }
                    UTF8_E0..=UTF8_F4 => {
                        let (lo, hi, rest) = match esc {
                            UTF8_E0 => (0xa0, 0xbf, 1),
                            UTF8_ED => (0x80, 0x9f, 1),
                            UTF8_F0 => (0x90, 0xbf, 2),
                            _ => (0x80, 0x8f, 2),
                        };
                        if !(lo..=hi).contains(&b) {
                            return;
                        }
                        Frame::Str {
                            node,
                            chars,
                            esc: UTF8_PENDING + rest,
                        }
                    }
                    n if n > UTF8_PENDING => {
                        if !(0x80..0xc0).contains(&b) {
                            return;
                        }
                        Frame::Str {
                            node,
                            chars,
                            esc: if n == UTF8_PENDING + 1 { 0 } else { n - 1 },
                        }
                    }
                    1 => match b {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            if max.is_some_and(|m| chars as usize + 1 > m) {
                                return;
                            }
                            Frame::Str {
                                node,
                                chars: chars + 1,
                                esc: 0,
                            }
                        }
                        b'u' => Frame::Str {
                            node,
                            chars,
                            esc: 5,
                        },
                        _ => return,
                    },
                    n => {
                        if !b.is_ascii_hexdigit() {
                            return;
                        }
                        if n == 5 && b.eq_ignore_ascii_case(&b'd') {
                            Frame::Str {
                                node,
                                chars,
                                esc: SURROGATE_GUARD,
                            }
                        } else if n == 2 {
                            if max.is_some_and(|m| chars as usize + 1 > m) {
                                return;
                            }
                            Frame::Str {
                                node,
                                chars: chars + 1,
                                esc: 0,
                            }
                        } else {
                            Frame::Str {
                                node,
                                chars,
                                esc: n - 1,
                            }
                        }
                    }
                };
                *s.frames.last_mut().expect("top") = new;
                out.push(s);
            }
            Frame::Key { mut buf } => {
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
            Frame::Num { node, mut buf } => {
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
                if ws {
                    structural_ws(&mut s, out);
                    return;
                }
                s.ws = 0;
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
                    (ObjState::Open | ObjState::AfterValue, b'}')
                        if self.object_done(node, seen) =>
                    {
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
            Frame::Arr { node, count, st } => {
                if ws {
                    structural_ws(&mut s, out);
                    return;
                }
                s.ws = 0;
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
    }
}
