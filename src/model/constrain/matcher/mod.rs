//! The incremental byte-level matcher of a compiled [`Schema`]: a set of parser
//! stacks ([`frame`]), each byte stepping every stack ([`step`]; a value's first
//! byte in [`start`], a string's bytes in [`string`]).

mod frame;
mod start;
mod step;
mod string;

pub(super) use frame::{ArrState, Frame, ObjState, Stack};

use super::{MAX_STACKS, Node, NodeId, Schema, numbers};
use std::sync::Arc;

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
}
