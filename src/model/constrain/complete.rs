//! The shortest bytes that make a matcher's output a whole accepted value: what
//! constrained decoding appends when its token budget is about to run out.

use super::matcher::{ArrState, Frame, Stack};
use super::{Matcher, Node};
use std::collections::{HashMap, HashSet};

/// Bytes tried at each position: printable ASCII but the space, closing punctuation
/// first (the search keeps the first path to each state, so a completion closes
/// rather than fills), then three UTF-8 continuation bytes, one in each range a
/// character's second byte may need (an answer cut inside a character can only go on
/// with one). No whitespace: JSON never needs it between tokens, and literals that
/// hold a space are spelled through [`useful_bytes`].
const ALPHABET: &[u8] = b"\"}],:{[10tfn-_abcdeghijklmopqrsuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\
23456789.!#$%&'()*+/;<=>?@\\^`|~\x80\x90\xA0";

/// The bytes that may follow where the output is between values or about to start
/// one: punctuation and every byte a JSON value may start with, in [`ALPHABET`]'s
/// order (so the search finds the same completion as over the whole alphabet).
const STRUCTURAL: &[u8] = b"\"}],:{[10tfn-23456789";

/// States kept per length: beyond it the search drops the latest-found ones.
const MAX_FRONTIER: usize = 4096;

/// States kept in all: a schema open to any key would otherwise grow the search
/// without bound; past it the search gives up.
const MAX_STATES: usize = 100_000;

/// The only bytes the search needs to try next from `m`, where fewer than every
/// byte will do: inside a string's plain text its closing `"`, after a whole number
/// `,`, `}` or `]` (once the value ends, the state is the same whatever it held, so
/// making it longer never helps), inside an object key its closing `"` and the next
/// bytes of the declared keys still missing (an object open to any key would
/// otherwise branch on every byte of every key), where any value may come `0` (and
/// `]` to end an array of them), inside literals their next bytes. `None` elsewhere.
fn useful_bytes(m: &Matcher) -> Option<Vec<u8>> {
    let top = |s: &Stack| s.frames.last().cloned();
    let stacks = m.stacks();
    if stacks
        .iter()
        .all(|s| matches!(top(s), Some(Frame::Str { esc: 0, .. })))
    {
        return Some(b"\"".to_vec());
    }
    if stacks
        .iter()
        .all(|s| matches!(top(s), Some(Frame::Num { node, buf }) if m.number_complete(node, &buf)))
    {
        return Some(b",}]".to_vec());
    }
    let mut next: Vec<u8> = Vec::new();
    if let Some(all) = stacks
        .iter()
        .map(|s| any_value_bytes(m, s))
        .collect::<Option<Vec<_>>>()
    {
        next = all.concat();
        next.sort_unstable();
        next.dedup();
        return Some(next);
    }
    if stacks
        .iter()
        .all(|s| matches!(top(s), Some(Frame::Key { .. })))
    {
        for s in stacks {
            next.extend(key_bytes(m, s)?);
        }
        next.sort_unstable();
        next.dedup();
        return Some(next);
    }
    // Between values (an object's or array's punctuation, or a value about to
    // start) only structural bytes and a value's first byte can come next: the
    // alphabet's letters would each be tried and refused.
    if stacks.iter().all(|s| {
        matches!(
            top(s),
            Some(Frame::Obj { .. } | Frame::Arr { .. } | Frame::Value(_))
        )
    }) {
        return Some(STRUCTURAL.to_vec());
    }
    for s in stacks {
        match top(s) {
            Some(Frame::Lit { rest }) if !rest.is_empty() => next.push(rest[0]),
            _ => return None,
        }
    }
    next.sort_unstable();
    next.dedup();
    Some(next)
}

/// Where the stack's next value may be any JSON (a value of [`Node::Any`], an
/// item of an array of them), the bytes the search needs to try: `0`, and `]`
/// before an array's first item. Any value leaves the same state after it, so the
/// shortest is enough; trying every opener nests `[[[[` without end.
fn any_value_bytes(m: &Matcher, s: &Stack) -> Option<&'static [u8]> {
    let any = |node| matches!(m.node(node), Node::Any);
    match s.frames.last()? {
        Frame::Value(node) if any(*node) => Some(b"0"),
        Frame::Arr { node, st, .. } => match (m.node(*node), st) {
            (Node::Array { items, min: 0, .. }, ArrState::Open) if any(*items) => Some(b"]0"),
            (Node::Array { items, .. }, ArrState::Comma) if any(*items) => Some(b"0"),
            _ => None,
        },
        _ => None,
    }
}

/// Inside an object key, the bytes the search needs to try: the closing `"` and the
/// next byte of each declared key not yet seen that the key so far begins (writing
/// any other key only makes the answer longer). `None` when the top is not a key.
fn key_bytes(m: &Matcher, s: &Stack) -> Option<Vec<u8>> {
    let n = s.frames.len();
    let Some(Frame::Key { buf }) = s.frames.last() else {
        return None;
    };
    let Some(Frame::Obj { node, seen, .. }) = s.frames.get(n.checked_sub(2)?) else {
        return None;
    };
    let mut out = vec![b'"'];
    // An object of any value declares no key: closing this one is shortest.
    let Node::Object {
        props, required, ..
    } = m.node(*node)
    else {
        return Some(out);
    };
    let missing = |i: usize| seen & (1 << i) == 0;
    // A key just opened while required keys are missing: the first of them, in the
    // schema's order. Every completion writes them all, in some order, and every
    // order is as long; trying each one multiplies the states by the orders (seven
    // required keys, as Browser Use's `AgentOutput` has, gave up at the state cap).
    if buf.is_empty()
        && let Some(i) = (0..props.len()).find(|&i| required[i] && missing(i))
    {
        // An empty key name is closed at once.
        return Some(vec![props[i].0.as_bytes().first().copied().unwrap_or(b'"')]);
    }
    for (i, (k, _)) in props.iter().enumerate() {
        let k = k.as_bytes();
        if missing(i) && k.len() > buf.len() && k.starts_with(buf) {
            out.push(k[buf.len()]);
        }
    }
    Some(out)
}

impl Matcher {
    /// The shortest byte string (at most `max_bytes`) after which the output is a
    /// whole value the schema accepts, searched breadth-first over printable ASCII
    /// with states deduplicated; `Some(empty)` when it already is; `None` when none
    /// is found within the bound.
    pub fn shortest_completion(&self, max_bytes: usize) -> Option<Vec<u8>> {
        if self.can_finish() {
            return Some(Vec::new());
        }
        // Every state reached: its matcher, its parent and the byte that led to it.
        let mut nodes: Vec<(Matcher, usize, u8)> = vec![(self.clone(), usize::MAX, 0)];
        let mut seen: HashSet<Vec<Stack>> = HashSet::from([self.stacks().to_vec()]);
        let mut level = 0..1;
        for _ in 0..max_bytes {
            let start = nodes.len();
            for i in level.clone() {
                // Inside a string or after a whole number, ending it is the only move
                // worth trying where it may end; inside a literal, its next byte.
                let useful = useful_bytes(&nodes[i].0)
                    .filter(|bytes| bytes.iter().any(|&b| nodes[i].0.after(&[b]).is_some()));
                let alphabet = useful.as_deref().unwrap_or(ALPHABET);
                for &b in alphabet {
                    if nodes.len() - start >= MAX_FRONTIER {
                        break;
                    }
                    if nodes.len() >= MAX_STATES {
                        return None;
                    }
                    let Some(next) = nodes[i].0.after(&[b]) else {
                        continue;
                    };
                    if !seen.insert(next.stacks().to_vec()) {
                        continue;
                    }
                    let done = next.can_finish();
                    nodes.push((next, i, b));
                    if done {
                        let mut path = Vec::new();
                        let mut k = nodes.len() - 1;
                        while k != 0 {
                            path.push(nodes[k].2);
                            k = nodes[k].1;
                        }
                        path.reverse();
                        return Some(path);
                    }
                }
            }
            if nodes.len() == start {
                return None;
            }
            level = start..nodes.len();
        }
        None
    }

    /// The bytes every completion starts with, as far as they are forced (inside a
    /// string's plain text its closing `"`, inside a literal its next byte, while
    /// that is the only useful byte), and the matcher after them. The state after a
    /// free-text field's closing quote is the same whatever the text held, so a
    /// search from it can be reused while the model writes on.
    fn forced_prefix(&self) -> (Vec<u8>, Matcher) {
        let mut forced = Vec::new();
        let mut m = self.clone();
        while !m.can_finish() && forced.len() < MAX_COMPLETION_BYTES {
            let next = match useful_bytes(&m).as_deref() {
                Some(&[b]) => m.after(&[b]).map(|n| (b, n)),
                _ => None,
            };
            let Some((b, n)) = next else { break };
            forced.push(b);
            m = n;
        }
        (forced, m)
    }
}

/// Decoding starts looking for the shortest way to close the value once this few
/// tokens are left.
const CLOSE_WINDOW: usize = 160;

/// Tokens between two searches.
const CLOSE_EVERY: usize = 4;

/// The value is closed once its shortest completion, in tokens, comes within this
/// many of the tokens left (a token the model picks can lengthen it by a key and its
/// value).
const CLOSE_MARGIN: usize = 16;

/// The longest completion searched for, in bytes.
const MAX_COMPLETION_BYTES: usize = 4096;

/// Searches a [`Closer`] remembers (a row's answer passes through a few fields).
const MEMO_ENTRIES: usize = 32;

/// When a constrained decoding loop must stop leaving the choice to the model and
/// close the value: it searches ([`Matcher::shortest_completion`]) once fewer than
/// 160 tokens are left, then every 4 tokens, and closes once the completion's tokens
/// come within 16 of the tokens left. While the answer stays in one free-text field
/// the search runs once: the completion after the field's closing quote is kept.
#[derive(Debug, Clone)]
pub struct Closer {
    /// The tokens left at which the next search runs.
    check_at: usize,
    /// Completions found, by the state they were searched from.
    memo: HashMap<Vec<Stack>, Vec<u8>>,
    /// The last completion spelled and its tokens (a row keeps one vocabulary): inside
    /// one field every call closes with the same bytes.
    last_spelling: Option<(Vec<u8>, Option<Vec<u32>>)>,
}

impl Default for Closer {
    fn default() -> Self {
        Closer {
            check_at: CLOSE_WINDOW,
            memo: HashMap::new(),
            last_spelling: None,
        }
    }
}

impl Closer {
    /// With `room` tokens left (and `now`: none the model may choose), the tokens
    /// ([`spell`] over `token_bytes`) that close the value the shortest way when it is
    /// time to write them (empty: it is already whole); `None` while the model may go
    /// on, or when no completion fits in `room` tokens.
    pub fn due(
        &mut self,
        matcher: &Matcher,
        room: usize,
        now: bool,
        token_bytes: &[Option<Vec<u8>>],
    ) -> Option<Vec<u32>> {
        if !now && room > self.check_at {
            return None;
        }
        let bound = room.saturating_mul(16).min(MAX_COMPLETION_BYTES);
        let ids = self
            .completion(matcher, bound)
            .and_then(|rest| self.spelled(rest, token_bytes))
            .filter(|ids| ids.len() <= room);
        match ids {
            Some(ids) if now || ids.len() + CLOSE_MARGIN >= room => return Some(ids),
            Some(ids) => {
                self.check_at = room
                    .saturating_sub(CLOSE_EVERY)
                    .max(ids.len() + CLOSE_MARGIN)
            }
            None => self.check_at = room.saturating_sub(CLOSE_EVERY),
        }
        None
    }

    /// [`spell`] of `rest`, reusing the last spelling when the bytes are the same (a
    /// scan of the whole vocabulary per byte otherwise).
    fn spelled(&mut self, rest: Vec<u8>, token_bytes: &[Option<Vec<u8>>]) -> Option<Vec<u32>> {
        if let Some((bytes, ids)) = &self.last_spelling
            && *bytes == rest
        {
            return ids.clone();
        }
        let ids = spell(&rest, token_bytes);
        self.last_spelling = Some((rest, ids.clone()));
        ids
    }

    /// [`Matcher::shortest_completion`] within `bound` bytes, its search after the
    /// forced bytes remembered (a completion found is the shortest whatever the
    /// bound; a search that found none runs again).
    fn completion(&mut self, matcher: &Matcher, bound: usize) -> Option<Vec<u8>> {
        let (mut rest, from) = matcher.forced_prefix();
        let key = from.stacks().to_vec();
        let tail = match self.memo.get(&key) {
            Some(tail) => tail.clone(),
            None => {
                let tail = from.shortest_completion(bound.checked_sub(rest.len())?)?;
                if self.memo.len() >= MEMO_ENTRIES {
                    self.memo.clear();
                }
                self.memo.insert(key, tail.clone());
                tail
            }
        };
        rest.extend_from_slice(&tail);
        (rest.len() <= bound).then_some(rest)
    }
}

/// Tokens spelling `bytes`, the longest token first at each point (`token_bytes`:
/// every token's raw bytes); `None` where no token spells what is left.
pub fn spell(mut bytes: &[u8], token_bytes: &[Option<Vec<u8>>]) -> Option<Vec<u32>> {
    let mut ids = Vec::new();
    while !bytes.is_empty() {
        let (id, n) = token_bytes
            .iter()
            .enumerate()
            .filter_map(|(id, b)| {
                let b = b.as_ref()?;
                (!b.is_empty() && bytes.starts_with(b)).then_some((id as u32, b.len()))
            })
            .max_by_key(|&(id, n)| (n, std::cmp::Reverse(id)))?;
        ids.push(id);
        bytes = &bytes[n..];
    }
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::super::Schema;
    use serde_json::json;

    fn schema(v: serde_json::Value) -> std::sync::Arc<Schema> {
        Schema::compile(&v).unwrap()
    }

    /// An answer with free text and one click on element 3 or 7.
    fn answer() -> std::sync::Arc<Schema> {
        schema(json!({
            "type": "object",
            "properties": {
                "thinking": {"type": "string", "maxLength": 400},
                "action": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {"click": {"type": "object",
                        "properties": {"index": {"enum": [3, 7]}},
                        "required": ["index"], "additionalProperties": false}},
                    "required": ["click"], "additionalProperties": false}}
            },
            "required": ["thinking", "action"],
            "additionalProperties": false
        }))
    }

    #[test]
    fn closes_an_open_answer_with_its_required_fields() {
        let s = answer();
        let mut m = s.matcher();
        assert!(m.advance(b"{\"thinking\": \"executed executed"));
        let rest = m.shortest_completion(200).unwrap();
        let rest = String::from_utf8(rest).unwrap();
        let whole = format!("{{\"thinking\": \"executed executed{rest}");
        let v: serde_json::Value = serde_json::from_str(&whole).expect(&whole);
        assert_eq!(v["action"][0]["click"]["index"], 3, "{whole}");
        assert!(m.advance(rest.as_bytes()) && m.can_finish());
        // Nothing to add to a whole value; too few bytes allowed: none found.
        assert_eq!(m.shortest_completion(10), Some(Vec::new()));
        let mut open = s.matcher();
        assert!(open.advance(b"{\"thinking\": \"x"));
        assert_eq!(open.shortest_completion(5), None);
    }

    /// An object open to any key (no `additionalProperties`) closes too: the
    /// search writes only the declared keys still missing, not every key it could.
    /// It gave up before (SmolLM2 answered `{"title": "…` and was cut, not closed).
    #[test]
    fn closes_an_object_open_to_any_key() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "website": {"type": "string"},
                "objective": {"type": "string"},
                "nested": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}
            },
            "required": ["website", "objective", "nested"]
        }));
        for prefix in [
            &b"{\"title\": \"Vegetarian lasagna"[..],
            &b"{\"title\": \"x\", \"webs"[..],
            &b"{\"nested\": {\"extra\": [1, {\"a\": \"b"[..],
        ] {
            let mut m = s.matcher();
            assert!(m.advance(prefix));
            let rest = m.shortest_completion(4096).unwrap_or_else(|| {
                panic!("no completion after {}", String::from_utf8_lossy(prefix))
            });
            let mut whole = prefix.to_vec();
            whole.extend_from_slice(&rest);
            let text = String::from_utf8(whole).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).expect(&text);
            assert!(
                v.get("website").is_some() && v.get("objective").is_some(),
                "{text}"
            );
            assert!(v["nested"]["k"].is_i64(), "{text}");
        }
    }

    /// Browser Use 0.13's `AgentOutput` (seven required keys, 24 kinds of action)
    /// closes from its start, from inside a field and from inside an action's key.
    /// The search tried every order of the missing keys and gave up at its state
    /// cap: `rmsweb serve` left such answers cut at `max_tokens`, not closed.
    #[test]
    fn closes_browser_uses_agent_output() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/browser_use/agent_output_schema.json"
        );
        let s = schema(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap());
        for prefix in [
            "",
            "{\"thinking\": \"The search box is [12]",
            "{\"thinking\": null, \"memory\": \"on the results\", \"action\": [{\"in",
            "{\"action\": [{\"click\": {\"index\": 4}}, ",
        ] {
            let mut m = s.matcher();
            assert!(m.advance(prefix.as_bytes()), "{prefix}");
            let rest = m
                .shortest_completion(4096)
                .unwrap_or_else(|| panic!("no completion after {prefix}"));
            let whole = format!("{prefix}{}", String::from_utf8(rest).unwrap());
            assert!(s.accepts(&whole), "{whole}");
            let v: serde_json::Value = serde_json::from_str(&whole).expect(&whole);
            for key in [
                "thinking",
                "evaluation_previous_goal",
                "memory",
                "next_goal",
            ] {
                assert!(v.get(key).is_some(), "{key} missing: {whole}");
            }
        }
    }

    /// An answer cut inside a multi-byte character (a byte-level model writes one a
    /// byte at a time) still closes: the character is finished first.
    #[test]
    fn closes_from_inside_a_character() {
        let s = answer();
        for (text, lead) in [
            (&b"{\"thinking\": \"\xF0\xAA\xBB"[..], "4-byte"),
            (&b"{\"thinking\": \"\xE0"[..], "E0 (second byte A0-BF)"),
            (&b"{\"thinking\": \"\xED"[..], "ED (second byte 80-9F)"),
            (&b"{\"thinking\": \"\xF4"[..], "F4 (second byte 80-8F)"),
        ] {
            let mut m = s.matcher();
            assert!(m.advance(text), "{lead}");
            let rest = m.shortest_completion(200).expect(lead);
            let mut whole = text.to_vec();
            whole.extend_from_slice(&rest);
            let v: serde_json::Value = serde_json::from_slice(&whole).expect(lead);
            assert_eq!(v["action"][0]["click"]["index"], 3, "{lead}");
        }
    }

    /// The closer searches once per free-text field: later calls in the same field
    /// reuse the completion after its closing quote, and a call elsewhere searches
    /// afresh; every answer equals the full search's.
    #[test]
    fn the_closer_reuses_a_fields_completion_and_only_that() {
        let s = answer();
        let at = |text: &str| {
            let mut m = s.matcher();
            assert!(m.advance(text.as_bytes()), "{text}");
            m
        };
        let mut closer = super::Closer::default();
        let texts = [
            "{\"thinking\": \"abc",
            "{\"thinking\": \"abc def ghi",
            "{\"thinking\": \"abc\", \"action\": [{\"click\": {\"index\": 7",
            "{\"thinking\": \"abc\", \"action\": [{\"cl",
        ];
        for (i, text) in texts.iter().enumerate() {
            let m = at(text);
            let want = m.shortest_completion(400);
            assert!(want.is_some(), "{text}");
            assert_eq!(closer.completion(&m, 400), want, "{text}");
            // The two calls inside the thinking share one search.
            assert_eq!(closer.memo.len(), i.max(1), "{text}");
        }
        // A remembered completion longer than the bound does not fit it.
        let m = at(texts[1]);
        let n = m.shortest_completion(400).unwrap().len();
        assert_eq!(closer.completion(&m, n - 1), None);
        assert_eq!(closer.completion(&m, n).map(|c| c.len()), Some(n));
    }

    #[test]
    fn spelling_takes_the_longest_token_and_the_closer_waits_for_its_turn() {
        let tb: Vec<Option<Vec<u8>>> = ["\"", "}", "\"}", "]}", "x"]
            .iter()
            .map(|p| Some(p.as_bytes().to_vec()))
            .chain([None])
            .collect();
        assert_eq!(super::spell(b"\"}]}", &tb), Some(vec![2, 3]));
        // Nothing spells `y`.
        assert_eq!(super::spell(b"xy}", &tb), None);
        let s = schema(json!({"type": "object",
            "properties": {"a": {"type": "string"}}, "required": ["a"],
            "additionalProperties": false}));
        let mut m = s.matcher();
        assert!(m.advance(b"{\"a\": \"long text"));
        let mut closer = super::Closer::default();
        // Plenty of room: not yet searched, then searched and not due.
        assert_eq!(closer.due(&m, 500, false, &tb), None);
        assert_eq!(closer.due(&m, 100, false, &tb), None);
        // Within the margin of the 1-token completion `"}`: due.
        assert_eq!(closer.due(&m, 17, false, &tb), Some(vec![2]));
        // Out of positions: due whatever the room.
        assert_eq!(
            super::Closer::default().due(&m, 500, true, &tb),
            Some(vec![2])
        );
        // A completion no token spells (`a`): never due.
        let mut open = s.matcher();
        assert!(open.advance(b"{"));
        assert_eq!(super::Closer::default().due(&open, 30, true, &tb), None);
    }
}
