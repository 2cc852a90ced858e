//! JSON-schema constrained decoding: a schema compiled to a tree of [`Node`]s and
//! an incremental byte-level matcher ([`Matcher`]) that says which continuations
//! keep the output a prefix of a JSON value the schema accepts.
//!
//! Supported (what OpenAI-style strict schemas and Browser Use's `AgentOutput`
//! use): `type` (one or a list), `properties`, `required`, `additionalProperties`
//! (`false`, `true` or a schema), `items`, `minItems`/`maxItems`, `anyOf`/`oneOf`,
//! `enum`/`const`, `minimum`/`maximum`, `minLength`/`maxLength`, local `$ref`s
//! (`#/$defs/…`, `#/definitions/…`); `min_items`/`max_items` (which Browser Use's
//! schema optimizer writes) count as `minItems`/`maxItems`. Annotations (`description`, `title`,
//! `default`) are ignored, and so are `pattern` and `format` (not enforced while
//! decoding). Anything else is refused with a message naming the keyword.
//!
//! The matcher is a set of parser stacks (alternatives of an `anyOf` are followed
//! side by side until the bytes tell them apart). Between JSON tokens at most
//! [`MAX_WHITESPACE`] whitespace bytes are allowed, so a model cannot stall in
//! blanks; strings may not hold raw control bytes.

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Most whitespace bytes in a row between JSON tokens.
pub const MAX_WHITESPACE: u8 = 2;

/// Most parser stacks followed at once (alternatives beyond it are dropped).
const MAX_STACKS: usize = 64;

/// Longest number, in bytes.
const MAX_NUMBER: usize = 24;

type NodeId = usize;

/// One compiled schema node.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Any,
    Null,
    Bool,
    Integer {
        min: Option<f64>,
        max: Option<f64>,
    },
    Number {
        min: Option<f64>,
        max: Option<f64>,
    },
    String {
        min_len: usize,
        max_len: Option<usize>,
    },
    /// One of these JSON texts (compact), from `enum` / `const`.
    Literals(Vec<Vec<u8>>),
    Object {
        props: Vec<(String, NodeId)>,
        required: Vec<bool>,
        /// Schema of other keys; `None` = no other keys.
        additional: Option<NodeId>,
    },
    Array {
        items: NodeId,
        min: usize,
        max: Option<usize>,
    },
    AnyOf(Vec<NodeId>),
    /// Placeholder while a `$ref` target compiles.
    Pending,
}

/// A compiled schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    nodes: Vec<Node>,
    root: NodeId,
}

impl Schema {
    /// Compiles a JSON schema (see the module documentation for what is supported).
    pub fn compile(schema: &Value) -> Result<Arc<Schema>> {
        let mut c = Compiler {
            nodes: vec![Node::Any],
            root: schema,
            refs: HashMap::new(),
        };
        let root = c.node(schema, "schema")?;
        Ok(Arc::new(Schema {
            nodes: c.nodes,
            root,
        }))
    }

    /// A schema that accepts any JSON object (`response_format: json_object`).
    pub fn any_object() -> Arc<Schema> {
        Arc::new(Schema {
            nodes: vec![
                Node::Any,
                Node::Object {
                    props: Vec::new(),
                    required: Vec::new(),
                    additional: Some(0),
                },
            ],
            root: 1,
        })
    }

    /// A matcher at the start of the output.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher {
            schema: Arc::clone(self),
            stacks: vec![Stack {
                frames: vec![Frame::Value(self.root)],
                ws: 0,
            }],
        }
    }

    /// Whether `text` is a whole value the schema accepts.
    pub fn accepts(self: &Arc<Self>, text: &str) -> bool {
        let mut m = self.matcher();
        m.advance(text.as_bytes()) && m.can_finish()
    }
}

struct Compiler<'a> {
    nodes: Vec<Node>,
    root: &'a Value,
    refs: HashMap<String, NodeId>,
}

impl Compiler<'_> {
    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn node(&mut self, v: &Value, at: &str) -> Result<NodeId> {
        match v {
            Value::Bool(true) => return Ok(0),
            Value::Bool(false) => bail!("{at}: `false` schemas accept nothing"),
            Value::Object(_) => {}
            other => bail!("{at}: a schema must be an object, found {other}"),
        }
        let m = v.as_object().context("object")?;
        const KNOWN: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "minItems",
            "maxItems",
            "min_items",
            "max_items",
            "anyOf",
            "oneOf",
            "enum",
            "const",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "$ref",
            "$defs",
            "definitions",
            "description",
            "title",
            "default",
            "pattern",
            "format",
            "examples",
            "$schema",
            "$id",
            "strict",
        ];
        if let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            bail!("{at}: the keyword `{k}` is not supported for constrained decoding");
        }
        if let Some(r) = m.get("$ref") {
            let r = r.as_str().context("$ref must be a string")?;
            return self.reference(r, at);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = m.get(key) {
                let alts = alts
                    .as_array()
                    .with_context(|| format!("{at}.{key} must be a list"))?;
                let mut ids = Vec::new();
                for (i, a) in alts.iter().enumerate() {
                    ids.push(self.node(a, &format!("{at}.{key}[{i}]"))?);
                }
                return Ok(self.push(Node::AnyOf(ids)));
            }
        }
        if let Some(c) = m.get("const") {
            return Ok(self.push(Node::Literals(vec![serde_json::to_vec(c)?])));
        }
        if let Some(e) = m.get("enum") {
            let e = e
                .as_array()
                .with_context(|| format!("{at}.enum must be a list"))?;
            let lits = e.iter().map(serde_json::to_vec).collect::<Result<_, _>>()?;
            return Ok(self.push(Node::Literals(lits)));
        }
        let types: Vec<&str> = match m.get("type") {
            None => {
                if m.contains_key("properties") {
                    vec!["object"]
                } else if m.contains_key("items") {
                    vec!["array"]
                } else {
                    return Ok(0);
                }
            }
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            Some(other) => bail!("{at}.type: expected a string or a list, found {other}"),
        };
        let mut ids = Vec::new();
        for t in types {
            let n = self.typed(t, m, at)?;
            ids.push(n);
        }
        Ok(match ids.as_slice() {
            [one] => *one,
            _ => self.push(Node::AnyOf(ids)),
        })
    }

    fn typed(&mut self, t: &str, m: &Map<String, Value>, at: &str) -> Result<NodeId> {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let count = |k: &str| m.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let node = match t {
            "null" => Node::Null,
            "boolean" => Node::Bool,
            "integer" => Node::Integer {
                min: num("minimum"),
                max: num("maximum"),
            },
            "number" => Node::Number {
                min: num("minimum"),
                max: num("maximum"),
            },
            "string" => Node::String {
                min_len: count("minLength").unwrap_or(0),
                max_len: count("maxLength"),
            },
            "array" => {
                let items = match m.get("items") {
                    Some(i) => self.node(i, &format!("{at}.items"))?,
                    None => 0,
                };
                Node::Array {
                    items,
                    min: count("minItems").or(count("min_items")).unwrap_or(0),
                    max: count("maxItems").or(count("max_items")),
                }
            }
            "object" => {
                let mut props = Vec::new();
                if let Some(p) = m.get("properties") {
                    let p = p
                        .as_object()
                        .with_context(|| format!("{at}.properties must be an object"))?;
                    for (k, s) in p {
                        let id = self.node(s, &format!("{at}.properties.{k}"))?;
                        props.push((k.clone(), id));
                    }
                }
                if props.len() > 64 {
                    bail!("{at}: more than 64 properties");
                }
                let req: Vec<&str> = m
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let required = props
                    .iter()
                    .map(|(k, _)| req.contains(&k.as_str()))
                    .collect();
                let additional = match m.get("additionalProperties") {
                    None | Some(Value::Bool(true)) => Some(0),
                    Some(Value::Bool(false)) => None,
                    Some(s) => Some(self.node(s, &format!("{at}.additionalProperties"))?),
                };
                Node::Object {
                    props,
                    required,
                    additional,
                }
            }
            other => bail!("{at}.type: unknown type `{other}`"),
        };
        Ok(self.push(node))
    }

    fn reference(&mut self, r: &str, at: &str) -> Result<NodeId> {
        if let Some(&id) = self.refs.get(r) {
            return Ok(id);
        }
        let path = r.strip_prefix("#/").with_context(|| {
            format!("{at}: only local references (#/...) are supported, not `{r}`")
        })?;
        let mut target = self.root;
        for part in path.split('/') {
            target = target
                .get(part)
                .with_context(|| format!("{at}: `{r}` names nothing in the schema"))?;
        }
        let slot = self.push(Node::Pending);
        self.refs.insert(r.to_string(), slot);
        let target = target.clone();
        let id = self.node(&target, r)?;
        self.nodes[slot] = Node::AnyOf(vec![id]);
        Ok(slot)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ObjState {
    Open,
    /// A key was read (`Some(i)`: property i; `None`: an additional key); `:` next.
    Key(Option<u16>),
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ArrState {
    Open,
    InValue,
    AfterValue,
    Comma,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Frame {
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

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Stack {
    frames: Vec<Frame>,
    ws: u8,
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

/// Whether `buf` is a prefix of a JSON number (an integer if `int`).
fn number_prefix(buf: &[u8], int: bool) -> bool {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    let mut i = 0;
    if buf.first() == Some(&b'-') {
        i = 1;
    }
    if i == buf.len() {
        return true;
    }
    if buf[i] == b'0' {
        i += 1;
    } else if buf[i].is_ascii_digit() {
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
    } else {
        return false;
    }
    if i == buf.len() {
        return true;
    }
    if int {
        return false;
    }
    if buf[i] == b'.' {
        i += 1;
        if i == buf.len() {
            return true;
        }
        if !buf[i].is_ascii_digit() {
            return false;
        }
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
        if i == buf.len() {
            return true;
        }
    }
    if buf[i] == b'e' || buf[i] == b'E' {
        i += 1;
        if i < buf.len() && (buf[i] == b'+' || buf[i] == b'-') {
            i += 1;
        }
        if i == buf.len() {
            return true;
        }
        while i < buf.len() && buf[i].is_ascii_digit() {
            i += 1;
        }
        return i == buf.len();
    }
    false
}

impl Matcher {
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
                let mut seen = std::collections::HashSet::new();
                next.retain(|s| seen.insert(s.clone()));
                next.truncate(MAX_STACKS);
            }
            stacks = next;
        }
        Some(Matcher {
            schema: Arc::clone(&self.schema),
            stacks,
        })
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

    /// Whether the output is finished and nothing but whitespace may follow.
    pub fn is_done(&self) -> bool {
        self.stacks.iter().all(|s| s.frames.is_empty())
    }

    fn node(&self, id: NodeId) -> &Node {
        self.schema.get(id)
    }

    fn number_complete(&self, node: NodeId, buf: &[u8]) -> bool {
        let int = matches!(self.node(node), Node::Integer { .. });
        if !number_prefix(buf, int) {
            return false;
        }
        let Some(v) = std::str::from_utf8(buf)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        else {
            return false;
        };
        let last = buf.last().copied().unwrap_or(b'-');
        if !last.is_ascii_digit() {
            return false;
        }
        match self.node(node) {
            Node::Integer { min, max } | Node::Number { min, max } => {
                min.is_none_or(|m| v >= m) && max.is_none_or(|m| v <= m)
            }
            _ => true,
        }
    }

    /// Whether an integer that starts with `buf` can still end within its bounds:
    /// more digits only move it away from zero, so a prefix already past the bound
    /// on its side is dead (numbers with a fraction or exponent are not checked).
    fn integer_in_reach(&self, node: NodeId, buf: &[u8]) -> bool {
        let Node::Integer { min, max } = self.node(node) else {
            return true;
        };
        let Some(v) = std::str::from_utf8(buf)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        else {
            return true;
        };
        if buf.first() == Some(&b'-') {
            min.is_none_or(|m| v >= m)
        } else {
            max.is_none_or(|m| v <= m)
        }
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
                if (b.is_ascii_digit() && self.integer_in_reach(node, &[b]))
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
                    && number_prefix(&longer, int)
                    && self.integer_in_reach(node, &longer)
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

/// Node ids of the unconstrained object and array that values of [`Node::Any`]
/// open (the any-node itself is 0); [`Schema::get`] resolves them.
const ANY_OBJECT: NodeId = usize::MAX - 1;
const ANY_ARRAY: NodeId = usize::MAX;

static ANY_OBJECT_NODE: Node = Node::Object {
    props: Vec::new(),
    required: Vec::new(),
    additional: Some(0),
};
static ANY_ARRAY_NODE: Node = Node::Array {
    items: 0,
    min: 0,
    max: None,
};

impl Schema {
    fn get(&self, id: NodeId) -> &Node {
        match id {
            ANY_OBJECT => &ANY_OBJECT_NODE,
            ANY_ARRAY => &ANY_ARRAY_NODE,
            i => &self.nodes[i],
        }
    }
}

/// Raw bytes of every token of a tokenizer's vocabulary, `None` for special and
/// added tokens (never allowed inside constrained text). Byte-level BPE tokens
/// (GPT-2's byte-to-character map, as Qwen's and rmsweb's tiny tokenizers use) are
/// mapped back to their bytes; other tokenizers' tokens are decoded alone.
pub fn token_bytes(tok: &tokenizers::Tokenizer) -> Vec<Option<Vec<u8>>> {
    let vocab = tok.get_vocab_size(true);
    let byte_level = matches!(
        tok.get_decoder(),
        Some(tokenizers::DecoderWrapper::ByteLevel(_))
    );
    let unmap = gpt2_unicode_to_byte();
    let added: std::collections::HashSet<u32> =
        tok.get_added_tokens_decoder().keys().copied().collect();
    (0..vocab as u32)
        .map(|id| {
            if added.contains(&id) {
                return None;
            }
            let piece = tok.id_to_token(id)?;
            if byte_level {
                piece.chars().map(|c| unmap.get(&c).copied()).collect()
            } else {
                let text = tok.decode(&[id], false).ok()?;
                (!text.contains('\u{FFFD}')).then(|| text.into_bytes())
            }
        })
        .collect()
}

/// GPT-2's printable stand-in character of each byte, reversed.
fn gpt2_unicode_to_byte() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut extra = 0u32;
    for b in 0u32..=255 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        if let Some(c) = char::from_u32(c) {
            map.insert(c, b as u8);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent_schema() -> Arc<Schema> {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "thinking": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "memory": {"type": "string"},
                "action": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"anyOf": [
                        {"type": "object", "properties": {"click": {"type": "object",
                            "properties": {"index": {"type": "integer", "minimum": 1}},
                            "required": ["index"], "additionalProperties": false}},
                         "required": ["click"], "additionalProperties": false},
                        {"type": "object", "properties": {"done": {"type": "object",
                            "properties": {"text": {"type": "string"}, "success": {"type": "boolean"}},
                            "required": ["text", "success"], "additionalProperties": false}},
                         "required": ["done"], "additionalProperties": false}
                    ]}
                }
            },
            "required": ["memory", "action"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn accepts_what_the_schema_allows_and_nothing_else() {
        let s = agent_schema();
        for ok in [
            r#"{"memory":"m","action":[{"click":{"index":12}}]}"#,
            r#"{"thinking":null,"memory":"a \"q\" \u00e9","action":[{"done":{"text":"é ok","success":true}},{"click":{"index":3}}]}"#,
            "{ \"action\": [ {\"click\": {\"index\": 1}} ], \"memory\": \"\" }",
        ] {
            assert!(s.accepts(ok), "{ok}");
        }
        for bad in [
            r#"{"memory":"m"}"#,
            r#"{"memory":"m","action":[]}"#,
            r#"{"memory":"m","action":[{"click":{"index":0}}]}"#,
            r#"{"memory":"m","action":[{"click":{"index":1.5}}]}"#,
            r#"{"memory":"m","action":[{"scroll":{}}]}"#,
            r#"{"memory":"m","memory":"n","action":[{"click":{"index":1}}]}"#,
            r#"{"memory":"m","action":[{"click":{"index":1}}],"extra":1}"#,
            "{\"memory\":\"line\nbreak\",\"action\":[{\"click\":{\"index\":1}}]}",
            "{\"memory\":\"m\",     \"action\":[{\"click\":{\"index\":1}}]}",
        ] {
            assert!(!s.accepts(bad), "{bad}");
        }
    }

    #[test]
    fn prefixes_are_live_and_completion_is_known() {
        let s = agent_schema();
        let mut m = s.matcher();
        assert!(m.advance(br#"{"mem"#));
        assert!(!m.clone().advance(b"x"));
        assert!(m.advance(br#"ory":"hi","action":[{"cl"#));
        assert!(!m.can_finish());
        assert!(m.advance(br#"ick":{"index":42"#));
        // The number may go on, or end here.
        assert!(m.after(b"7").is_some() && m.after(b"}").is_some());
        // An integer already past its maximum is dead at once.
        let capped =
            Schema::compile(&json!({"type": "integer", "minimum": -5, "maximum": 42})).unwrap();
        let m2 = capped.matcher();
        assert!(m2.after(b"4").is_some() && m2.after(b"42").is_some());
        assert!(m2.after(b"43").is_none() && m2.after(b"5").is_some() && m2.after(b"50").is_none());
        assert!(m2.after(b"-5").is_some() && m2.after(b"-6").is_none());
        assert!(m.advance(b"}}]}"));
        assert!(m.can_finish() && m.is_done());
        assert!(m.after(b" ").is_some() && m.after(b"x").is_none());
    }

    #[test]
    fn references_enums_and_unsupported_keywords() {
        let s = Schema::compile(&json!({
            "$defs": {"color": {"enum": ["red", "blue", 3]}},
            "type": "object",
            "properties": {"c": {"$ref": "#/$defs/color"}, "n": {"type": ["integer", "null"], "maximum": 9}},
            "required": ["c"]
        }))
        .unwrap();
        assert!(s.accepts(r#"{"c":"red","n":null}"#));
        assert!(s.accepts(r#"{"c":3,"n":9,"other":[1,{"x":true}]}"#));
        assert!(!s.accepts(r#"{"c":"green"}"#));
        assert!(!s.accepts(r#"{"c":"red","n":10}"#));
        let e = Schema::compile(&json!({"type": "object", "patternProperties": {}})).unwrap_err();
        assert!(e.to_string().contains("`patternProperties`"), "{e}");
        assert!(Schema::any_object().accepts(r#"{"a":[1,2,{"b":"c"}]}"#));
        assert!(!Schema::any_object().accepts("[1]"));
        // Strings hold whole UTF-8 characters only.
        let text = Schema::compile(&json!({"type": "string", "maxLength": 2})).unwrap();
        assert!(text.accepts("\"é€\""));
        let m = text.matcher();
        assert!(m.after(b"\"\x80").is_none() && m.after(b"\"\xff").is_none());
        assert!(m.after(b"\"\xc3\"").is_none() && m.after(b"\"\xc3\xa9").is_some());
        assert!(
            m.after(b"\"\xc3\xa9\xe2\x82\xac\xc3").is_none(),
            "a third character"
        );
        assert!(m.after(b"\"ab\\").is_none(), "an escape past maxLength");
        assert!(m.after(b"\"\xe0\x80").is_none() && m.after(b"\"\xed\xa0").is_none());
        assert!(m.after(b"\"\xf4\x90").is_none() && m.after(b"\"\xe0\xa0\x80").is_some());
        assert!(m.after(b"\"\\ud7ff").is_some() && m.after(b"\"\\ud8").is_none());
    }

    #[test]
    fn byte_level_tokens_map_back_to_their_bytes() {
        let map = gpt2_unicode_to_byte();
        assert_eq!(map.len(), 256);
        assert_eq!(map[&'Ġ'], b' ');
        assert_eq!(map[&'a'], b'a');
    }
}
