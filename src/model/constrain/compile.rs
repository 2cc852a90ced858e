//! A JSON schema compiled into [`Node`]s: every keyword checked where it is, values
//! of the wrong kind and contradictions (`minimum` above `maximum`, an empty `enum`)
//! refused with the path and the reason, and the work bounded: nesting (`$ref` hops
//! included) at [`MAX_DEPTH`], nodes at [`MAX_NODES`], one list of alternatives
//! at [`MAX_ALTERNATIVES`]. [`super::graph`] then resolves alternatives and checks
//! that every node has a value.

use super::{MAX_ALTERNATIVES, MAX_DEPTH, MAX_NODES, MAX_NUMBER, Node, NodeId};
use crate::util::json::excerpt_value;
use crate::util::sanitize::excerpt;
use anyhow::{Result, bail};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The node every `true` or empty schema compiles to.
pub(super) const ANY: NodeId = 0;

/// Longest path kept for a node (its middle is cut past this).
const MAX_PATH: usize = 240;

/// Longest key quoted in a path.
const MAX_KEY: usize = 48;

/// The keywords compiled or deliberately ignored (annotations, `pattern`, `format`).
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

/// `at` + `seg`, keys clipped and the whole kept under [`MAX_PATH`] bytes.
fn join(at: &str, seg: &str) -> String {
    let path = format!("{at}{seg}");
    if path.len() <= MAX_PATH {
        return path;
    }
    let mut head = MAX_PATH / 3;
    while !path.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = path.len() - MAX_PATH / 2;
    while !path.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", &path[..head], &path[tail..])
}

/// A key for a path: at most [`MAX_KEY`] bytes, cleaned.
fn key(k: &str) -> String {
    if k.len() <= MAX_KEY {
        return crate::util::sanitize::clean_line(k).into_owned();
    }
    let mut end = MAX_KEY;
    while !k.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", crate::util::sanitize::clean_line(&k[..end]))
}

/// A number from JSON for a message (`5`, `1.5`, `1e30`).
fn num(v: f64) -> String {
    if v.abs() >= 1e16 {
        format!("{v:e}")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

pub(super) struct Compiler<'a> {
    pub(super) nodes: Vec<Node>,
    /// Where each node is in the schema (`schema.properties.a`), for messages.
    pub(super) paths: Vec<String>,
    root: &'a Value,
    refs: HashMap<&'a str, NodeId>,
}

impl<'a> Compiler<'a> {
    pub(super) fn new(root: &'a Value) -> Self {
        Compiler {
            nodes: vec![Node::Any],
            paths: vec!["schema".into()],
            root,
            refs: HashMap::new(),
        }
    }

    fn push(&mut self, n: Node, at: &str) -> Result<NodeId> {
        if self.nodes.len() >= MAX_NODES {
            bail!("{at}: the schema compiles to more than {MAX_NODES} nodes");
        }
        self.nodes.push(n);
        self.paths.push(at.to_string());
        Ok(self.nodes.len() - 1)
    }

    /// Compiles the schema `v` found at `at`, `depth` levels down.
    // Kept whole: the keywords are taken in the order their meaning needs ($ref, then
    // the combinators, then the type's own), each returning as soon as it decides.
    pub(super) fn node(&mut self, v: &'a Value, at: &str, depth: usize) -> Result<NodeId> {
        if depth > MAX_DEPTH {
            bail!("{at}: the schema is nested deeper than {MAX_DEPTH} levels (`$ref`s included)");
        }
        let m = match v {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => bail!("{at}: `false` accepts no value"),
            Value::Object(m) => m,
            other => bail!(
                "{at}: a schema must be an object or a boolean, found {}",
                excerpt_value(other)
            ),
        };
        if let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            bail!(
                "{at}: the keyword `{}` is not supported for constrained decoding",
                excerpt(k)
            );
        }
        if let Some(r) = m.get("$ref") {
            let Some(r) = r.as_str() else {
                bail!("{at}.$ref: expected a string, found {}", excerpt_value(r));
            };
            return self.reference(r, at, depth);
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(alts) = m.get(kw) {
                let alts = alternatives(alts, at, kw, "alternatives")?;
                let mut ids = Vec::with_capacity(alts.len());
                for (i, a) in alts.iter().enumerate() {
                    ids.push(self.node(a, &join(at, &format!(".{kw}[{i}]")), depth + 1)?);
                }
                return self.push(Node::AnyOf(ids), at);
            }
        }
        if let Some(c) = m.get("const") {
            return self.push(Node::Literals(vec![serde_json::to_vec(c)?]), at);
        }
        if let Some(e) = m.get("enum") {
            let e = alternatives(e, at, "enum", "values")?;
            let lits = e.iter().map(serde_json::to_vec).collect::<Result<_, _>>()?;
            return self.push(Node::Literals(lits), at);
        }
        let types: Vec<&str> = match m.get("type") {
            None => {
                if m.contains_key("properties") {
                    vec!["object"]
                } else if m.contains_key("items") {
                    vec!["array"]
                } else {
                    return Ok(ANY);
                }
            }
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) if !ts.is_empty() => {
                let mut out = Vec::with_capacity(ts.len());
                for t in ts {
                    match t.as_str() {
                        Some(t) if !out.contains(&t) => out.push(t),
                        Some(_) => {}
                        None => bail!(
                            "{at}.type: a list of type names, found {}",
                            excerpt_value(t)
                        ),
                    }
                }
                out
            }
            Some(other) => bail!(
                "{at}.type: expected a type name or a non-empty list of them, found {}",
                excerpt_value(other)
            ),
        };
        let mut ids = Vec::new();
        for t in types {
            ids.push(self.typed(t, m, at, depth)?);
        }
        match ids.as_slice() {
            [one] => Ok(*one),
            _ => self.push(Node::AnyOf(ids), at),
        }
    }

    fn typed(
        &mut self,
        t: &str,
        m: &'a Map<String, Value>,
        at: &str,
        depth: usize,
    ) -> Result<NodeId> {
        let node = match t {
            "null" => Node::Null,
            "boolean" => Node::Bool,
            "integer" => {
                let (min, max) = bounds(m, at)?;
                integer_range(min, max, at)?;
                Node::Integer { min, max }
            }
            "number" => {
                let (min, max) = bounds(m, at)?;
                Node::Number { min, max }
            }
            "string" => {
                let (min_len, max_len) = counts(m, at, "minLength", "maxLength", None)?;
                Node::String { min_len, max_len }
            }
            "array" => {
                let (min, max) = counts(
                    m,
                    at,
                    "minItems",
                    "maxItems",
                    Some(("min_items", "max_items")),
                )?;
                let items = match m.get("items") {
                    Some(i) => self.node(i, &join(at, ".items"), depth + 1)?,
                    None => ANY,
                };
                Node::Array { items, min, max }
            }
            "object" => self.object(m, at, depth)?,
            other => bail!("{at}.type: unknown type `{}`", excerpt(other)),
        };
        self.push(node, at)
    }

    fn object(&mut self, m: &'a Map<String, Value>, at: &str, depth: usize) -> Result<Node> {
        let listed = match m.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(other) => bail!(
                "{at}.properties: expected an object, found {}",
                excerpt_value(other)
            ),
        };
        let required: Vec<&str> = match m.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => {
                let mut out = Vec::with_capacity(r.len());
                for k in r {
                    match k.as_str() {
                        Some(k) => out.push(k),
                        None => bail!(
                            "{at}.required: a list of property names, found {}",
                            excerpt_value(k)
                        ),
                    }
                }
                out
            }
            Some(other) => bail!(
                "{at}.required: expected a list of property names, found {}",
                excerpt_value(other)
            ),
        };
        let additional = match m.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(ANY),
            Some(Value::Bool(false)) => None,
            Some(s) => Some(self.node(s, &join(at, ".additionalProperties"), depth + 1)?),
        };
        let mut props = Vec::new();
        if let Some(p) = listed {
            if p.len() > 64 {
                bail!("{at}.properties: {} properties; at most 64", p.len());
            }
            for (k, s) in p {
                let id = self.node(s, &join(at, &format!(".properties.{}", key(k))), depth + 1)?;
                props.push((k.clone(), id));
            }
        }
        // A required key the properties do not list takes the schema of other keys.
        for k in &required {
            if props.iter().any(|(p, _)| p == k) {
                continue;
            }
            match additional {
                Some(id) => props.push((k.to_string(), id)),
                None => bail!(
                    "{at}.required: `{}` is required but not allowed (not in `properties`, and `additionalProperties` is false)",
                    excerpt(k)
                ),
            }
            if props.len() > 64 {
                bail!("{at}: more than 64 properties (required ones included)");
            }
        }
        let required = props
            .iter()
            .map(|(k, _)| required.contains(&k.as_str()))
            .collect();
        Ok(Node::Object {
            props,
            required,
            additional,
        })
    }

    /// A local `$ref` (`#/$defs/a`, `#/definitions/a`, any JSON pointer into the
    /// schema): compiled once, later uses share its node.
    fn reference(&mut self, r: &'a str, at: &str, depth: usize) -> Result<NodeId> {
        if let Some(&id) = self.refs.get(r) {
            return Ok(id);
        }
        let Some(pointer) = r.strip_prefix('#') else {
            bail!(
                "{at}: only local references (#/...) are supported, not `{}`",
                excerpt(r)
            );
        };
        let Some(target) = self.root.pointer(pointer) else {
            bail!("{at}: `{}` names nothing in the schema", excerpt(r));
        };
        let name = format!("{at} ($ref {})", excerpt(r));
        let slot = self.push(Node::Pending, &name)?;
        self.refs.insert(r, slot);
        let id = self.node(target, &excerpt(r), depth + 1)?;
        self.nodes[slot] = Node::AnyOf(vec![id]);
        Ok(slot)
    }
}

/// The list of keyword `kw` (`anyOf`, `enum`): not empty, at most
/// [`MAX_ALTERNATIVES`] `items`.
fn alternatives<'v>(v: &'v Value, at: &str, kw: &str, items: &str) -> Result<&'v [Value]> {
    let Some(list) = v.as_array() else {
        bail!("{at}.{kw}: expected a list, found {}", excerpt_value(v));
    };
    if list.is_empty() {
        bail!("{at}.{kw}: an empty list accepts no value");
    }
    if list.len() > MAX_ALTERNATIVES {
        bail!(
            "{at}.{kw}: {} {items}; at most {MAX_ALTERNATIVES} alternatives are followed while decoding",
            list.len()
        );
    }
    Ok(list)
}

/// `minimum` and `maximum`: numbers when present, the first not above the second.
fn bounds(m: &Map<String, Value>, at: &str) -> Result<(Option<f64>, Option<f64>)> {
    let get = |k: &str| -> Result<Option<f64>> {
        match m.get(k) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) => Ok(Some(x)),
                None => bail!("{at}.{k}: expected a number, found {}", excerpt_value(v)),
            },
        }
    };
    let (min, max) = (get("minimum")?, get("maximum")?);
    if let (Some(a), Some(b)) = (min, max)
        && a > b
    {
        bail!(
            "{at}: minimum {} is above maximum {}: no number satisfies it",
            num(a),
            num(b)
        );
    }
    Ok((min, max))
}

/// Checks that an integer lies within the bounds and is short enough for the
/// matcher to write ([`MAX_NUMBER`] bytes).
fn integer_range(min: Option<f64>, max: Option<f64>, at: &str) -> Result<()> {
    let digits = |neg: bool| (MAX_NUMBER - usize::from(neg)) as i32;
    let top = 10f64.powi(digits(false)) - 1.0;
    let bottom = -(10f64.powi(digits(true)) - 1.0);
    let lo = min.map_or(bottom, f64::ceil);
    let hi = max.map_or(top, f64::floor);
    if let (Some(a), Some(b)) = (min, max)
        && lo > hi
    {
        bail!(
            "{at}: no integer lies between minimum {} and maximum {}",
            num(a),
            num(b)
        );
    }
    if lo > top || hi < bottom {
        let (k, v) = if lo > top {
            ("minimum", min.unwrap_or(lo))
        } else {
            ("maximum", max.unwrap_or(hi))
        };
        bail!(
            "{at}: {k} {} is beyond the longest integer constrained decoding writes ({MAX_NUMBER} characters)",
            num(v)
        );
    }
    Ok(())
}

/// A count keyword (`minLength`, `maxItems`, ...): a whole number from 0 to
/// `u32::MAX`, the lower not above the upper. `alias`: other spellings
/// (`min_items`, `max_items`) read when the main ones are absent.
fn counts(
    m: &Map<String, Value>,
    at: &str,
    lo: &str,
    hi: &str,
    alias: Option<(&str, &str)>,
) -> Result<(usize, Option<usize>)> {
    let get = |k: &str, other: Option<&str>| -> Result<Option<(String, usize)>> {
        let (name, v) = match (m.get(k), other.and_then(|o| m.get(o).map(|v| (o, v)))) {
            (Some(v), _) => (k, v),
            (None, Some((o, v))) => (o, v),
            (None, None) => return Ok(None),
        };
        let n = v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|x| x.fract() == 0.0 && *x >= 0.0)
                    .map(|x| x as u64)
            })
            .filter(|&n| n <= u64::from(u32::MAX));
        match n {
            Some(n) => Ok(Some((name.to_string(), n as usize))),
            None => bail!(
                "{at}.{name}: expected a whole number from 0 to {}, found {}",
                u32::MAX,
                excerpt_value(v)
            ),
        }
    };
    let min = get(lo, alias.map(|a| a.0))?;
    let max = get(hi, alias.map(|a| a.1))?;
    if let (Some((a, x)), Some((b, y))) = (&min, &max)
        && x > y
    {
        bail!("{at}: {a} {x} is above {b} {y}: no value satisfies it");
    }
    Ok((min.map_or(0, |m| m.1), max.map(|m| m.1)))
}
