//! JSON-schema constrained decoding: a schema compiled to a tree of [`Node`]s and
//! an incremental byte-level matcher ([`Matcher`]) that says which continuations
//! keep the output a prefix of a JSON value the schema accepts.
//!
//! Supported (what OpenAI-style strict schemas and Browser Use's `AgentOutput`
//! use): `type` (one or a list), `properties`, `required`, `additionalProperties`
//! (`false`, `true` or a schema), `items`, `minItems`/`maxItems`, `anyOf`/`oneOf`,
//! `enum`/`const`, `minimum`/`maximum`, `minLength`/`maxLength`, local `$ref`s
//! (`#/$defs/…`, `#/definitions/…`, any JSON pointer into the schema, recursion
//! through objects and arrays included); `min_items`/`max_items` (which Browser
//! Use's schema optimizer writes) count as `minItems`/`maxItems`. Annotations
//! (`description`, `title`, `default`) are ignored, and so are `pattern` and
//! `format` (not enforced while decoding). Anything else is refused with a message
//! naming the keyword. A schema is compiled (`compile`) and its alternatives
//! resolved (`graph`) once per request, in time and memory bounded by its size:
//! loops, schemas past the limits and schemas no value satisfies are refused, so
//! decoding never starts on something it cannot finish.
//!
//! The matcher is a set of parser stacks (alternatives of an `anyOf` are followed
//! side by side until the bytes tell them apart). Between JSON tokens at most
//! [`MAX_WHITESPACE`] whitespace bytes are allowed, so a model cannot stall in
//! blanks; strings may not hold raw control bytes.

use anyhow::Result;
use serde_json::Value;
use std::sync::Arc;

mod compile;
mod complete;
mod graph;
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

/// Deepest nesting of a schema, `$ref` hops included (OpenAI's own limit is 10).
pub const MAX_DEPTH: usize = 64;

/// Most nodes a schema compiles to.
pub const MAX_NODES: usize = 10_000;

/// Most alternatives one value may start as (`anyOf`/`oneOf`, nested ones and the
/// `$ref`s they reach counted together, and `enum` values).
pub const MAX_ALTERNATIVES: usize = 256;

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
    /// Errors name the place in the schema and the reason: an unsupported keyword,
    /// a value of the wrong kind, a contradiction (`minimum` above `maximum`, an empty
    /// `enum`), a `$ref` loop with nothing in between, no finite value, or a limit
    /// passed ([`MAX_DEPTH`], [`MAX_NODES`], [`MAX_ALTERNATIVES`]). Compiling takes
    /// time and memory in proportion to the schema, whatever it holds.
    pub fn compile(schema: &Value) -> Result<Arc<Schema>> {
        let mut c = compile::Compiler::new(schema);
        let root = c.node(schema, "schema", 0)?;
        graph::resolve(&mut c.nodes, &c.paths, root)?;
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

    fn refusal(v: serde_json::Value) -> String {
        format!("{:#}", Schema::compile(&v).unwrap_err())
    }

    /// `{"$defs": {"d0": .., "d1": .., ...}, "$ref": "#/$defs/d0"}`.
    fn chain(n: usize, def: impl Fn(usize) -> serde_json::Value) -> serde_json::Value {
        let defs: serde_json::Map<String, serde_json::Value> =
            (0..n).map(|i| (format!("d{i}"), def(i))).collect();
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    }

    fn to(i: usize) -> serde_json::Value {
        json!({"$ref": format!("#/$defs/d{i}")})
    }

    #[test]
    fn ref_loops_and_deep_chains_are_refused_without_recursing() {
        let e = refusal(json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}));
        assert!(
            e.contains("#/$defs/a") && e.contains("refers back to itself"),
            "{e}"
        );
        let e = refusal(json!({"$ref": "#"}));
        assert!(e.contains("refers back to itself"), "{e}");
        // A loop found through other definitions compiled first: no deep compile.
        let mut defs = serde_json::Map::new();
        for i in 0..5000 {
            defs.insert(
                format!("d{i}"),
                json!({"anyOf": [to((i + 1) % 5000), {"type": "null"}]}),
            );
        }
        let e = refusal(json!({"$defs": defs, "type": "object",
            "properties": (0..5000).rev().map(|i| (format!("p{i}"), to(i))).take(64).collect::<serde_json::Map<_, _>>()}));
        assert!(
            e.contains("deeper than 64") || e.contains("refers back"),
            "{e}"
        );
        let e = refusal(chain(100_000, |i| {
            if i < 99_999 {
                to(i + 1)
            } else {
                json!({"type": "string"})
            }
        }));
        assert!(e.contains("deeper than 64"), "{e}");
        // Recursion through an object or array is fine.
        let tree = Schema::compile(&json!({"$defs": {"n": {"type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
            "$ref": "#/$defs/n"}))
        .unwrap();
        assert!(tree.accepts(r#"{"kids":[{"kids":[]},{}]}"#));
    }

    #[test]
    fn alternatives_are_flattened_and_bounded() {
        // 2^28 paths to one integer: one alternative.
        let s = Schema::compile(&chain(29, |i| {
            if i < 28 {
                json!({"anyOf": [to(i + 1), to(i + 1)]})
            } else {
                json!({"type": "integer", "maximum": 9})
            }
        }))
        .unwrap();
        assert!(s.accepts("7") && !s.accepts("10") && !s.accepts("\"7\""));
        let m = s.matcher();
        assert_eq!(m.after(b"3").unwrap().stacks().len(), 1);
        let e =
            refusal(json!({"anyOf": (0..300).map(|i| json!({"const": i})).collect::<Vec<_>>()}));
        assert!(e.contains("300 alternatives"), "{e}");
        let e = refusal(json!({"enum": (0..300).collect::<Vec<_>>()}));
        assert!(e.contains("300 values"), "{e}");
        let e = refusal(json!({"anyOf": (0..3).map(|k| json!({"anyOf":
            (0..100).map(|i| json!({"const": k * 100 + i})).collect::<Vec<_>>()})).collect::<Vec<_>>()}));
        assert!(e.contains("300 alternatives"), "{e}");
    }

    #[test]
    fn unsatisfiable_schemas_say_why() {
        for (v, says) in [
            (
                json!({"type": "integer", "minimum": 5, "maximum": 3}),
                "minimum 5 is above maximum 3",
            ),
            (
                json!({"type": "integer", "minimum": 0.5, "maximum": 0.7}),
                "no integer lies between",
            ),
            (
                json!({"type": "integer", "minimum": 1e30}),
                "beyond the longest integer",
            ),
            (
                json!({"type": "string", "minLength": 9, "maxLength": 2}),
                "minLength 9 is above maxLength 2",
            ),
            (
                json!({"type": "array", "min_items": 2, "max_items": 1}),
                "min_items 2 is above max_items 1",
            ),
            (json!({"enum": []}), "enum: an empty list"),
            (
                json!({"type": "string", "maxLength": -1}),
                "maxLength: expected a whole number",
            ),
            (
                json!({"type": "number", "minimum": "0"}),
                "minimum: expected a number",
            ),
            (
                json!({"type": "object", "required": "a"}),
                "required: expected a list",
            ),
            (json!({"type": ["string", 3]}), "type: a list of type names"),
            (
                json!({"type": "object", "required": ["x"], "additionalProperties": false}),
                "`x` is required but not allowed",
            ),
            (
                json!({"$defs": {"n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}},
                "type": "array", "items": {"$ref": "#/$defs/n"}}),
                "no finite value",
            ),
            (json!(false), "accepts no value"),
        ] {
            let e = refusal(v.clone());
            assert!(e.contains(says), "{v}: {e}");
        }
        // A required key the properties do not list takes additionalProperties' schema.
        let s = Schema::compile(&json!({"type": "object", "required": ["x"],
            "additionalProperties": {"type": "integer"}}))
        .unwrap();
        assert!(s.accepts(r#"{"x":1}"#) && !s.accepts("{}") && !s.accepts(r#"{"x":"a"}"#));
        // An optional recursive property is fine; `[]` ends it.
        let s = Schema::compile(&json!({"$defs": {"n": {"type": "object",
            "properties": {"n": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}))
        .unwrap();
        assert!(s.accepts(r#"{"n":{"n":{}}}"#));
    }

    #[test]
    fn huge_keys_and_values_are_quoted_short() {
        let k = "k".repeat(1 << 20);
        let e = refusal(
            json!({"type": "object", "properties": {k.clone(): {"type": "integer", "minimum": 2, "maximum": 1}}}),
        );
        assert!(e.len() < 600, "{}", e.len());
        let e = refusal(json!({k.clone(): 1}));
        assert!(e.len() < 600 && e.contains("not supported"), "{}", e.len());
        let e = refusal(json!({"type": "integer", "minimum": [k]}));
        assert!(e.len() < 600, "{}", e.len());
    }

    #[test]
    fn byte_level_tokens_map_back_to_their_bytes() {
        let map = gpt2_unicode_to_byte();
        assert_eq!(map.len(), 256);
        assert_eq!(map[&'Ġ'], b' ');
        assert_eq!(map[&'a'], b'a');
    }
}
