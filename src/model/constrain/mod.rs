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

mod complete;
mod matcher;
mod numbers;
mod quotes;
mod tokens;

pub use complete::{Closer, spell};
pub use matcher::Matcher;
use matcher::{Frame, Stack};
pub use quotes::QuoteGuard;
pub use tokens::token_bytes;

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
        Matcher::start(
            Arc::clone(self),
            Stack {
                frames: vec![Frame::Value(self.root)],
                ws: 0,
            },
        )
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

/// Node ids of the unconstrained object and array that values of [`Node::Any`]
/// open (the any-node itself is 0); [`Schema::get`] resolves them.
pub(super) const ANY_OBJECT: NodeId = usize::MAX - 1;
pub(super) const ANY_ARRAY: NodeId = usize::MAX;

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

#[cfg(test)]
mod tests {
    use super::tokens::gpt2_unicode_to_byte;
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
