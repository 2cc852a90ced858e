//! Browser actions: the canonical `{name, params}` form of FORMATS.md, the mapping
//! from older Browser Use action names, and (in submodules) parsing from model output.

pub mod check;
pub mod parse;
pub mod render;
mod scan;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Every canonical action name (Browser Use 0.8+, with 0.13's page tools and file
/// system after `done`).
pub const CANONICAL_NAMES: &[&str] = &[
    "navigate",
    "search",
    "click",
    "input",
    "scroll",
    "send_keys",
    "switch",
    "close",
    "go_back",
    "wait",
    "extract",
    "select_dropdown",
    "dropdown_options",
    "upload_file",
    "find_text",
    "done",
    "search_page",
    "find_elements",
    "evaluate",
    "write_file",
    "replace_file",
    "read_file",
    "screenshot",
    "save_as_pdf",
];

/// One action in canonical JSON form: `{"name": "click", "params": {"index": 12}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub name: String,
    #[serde(default)]
    pub params: Map<String, Value>,
}

impl Action {
    /// An action from a name and a JSON object of parameters (anything else gives no params).
    pub fn new(name: impl Into<String>, params: Value) -> Self {
        let params = match params {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Action {
            name: name.into(),
            params,
        }
    }

    /// Whether the name is one of [`CANONICAL_NAMES`].
    pub fn is_known(&self) -> bool {
        CANONICAL_NAMES.contains(&self.name.as_str())
    }

    /// The integer parameter `key` (accepting integral floats and numeric strings).
    pub fn int_param(&self, key: &str) -> Option<i64> {
        match self.params.get(key)? {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The string parameter `key`.
    pub fn str_param(&self, key: &str) -> Option<&str> {
        self.params.get(key)?.as_str()
    }

    /// The boolean parameter `key` (accepting `"true"`/`"false"` strings).
    pub fn bool_param(&self, key: &str) -> Option<bool> {
        match self.params.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The element index this action targets, if it targets one.
    pub fn target_index(&self) -> Option<i64> {
        match self.name.as_str() {
            "click" | "input" | "select_dropdown" | "dropdown_options" | "upload_file" => {
                self.int_param("index")
            }
            "scroll" => self.int_param("index"),
            _ => None,
        }
    }

    /// The viewport point of a coordinate click (`click {coordinate_x, coordinate_y}`,
    /// offered by Browser Use 0.13 to some models), when the action is one.
    pub fn point(&self) -> Option<(f64, f64)> {
        if self.name != "click" {
            return None;
        }
        let num = |k: &str| match self.params.get(k)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        Some((num("coordinate_x")?, num("coordinate_y")?))
    }

    /// True for actions that do not move the task forward by themselves
    /// (wait, scroll, go_back): trivial as RL targets.
    pub fn is_trivial(&self) -> bool {
        matches!(self.name.as_str(), "wait" | "scroll" | "go_back")
    }

    /// A short one-line rendering such as `click(12)` or `input(5, "alice")`.
    pub fn short(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for key in ["index", "url", "query", "text", "keys", "tab_id", "seconds"] {
            if let Some(v) = self.params.get(key) {
                parts.push(match v {
                    Value::String(s) => format!("{s:?}"),
                    other => other.to_string(),
                });
            }
        }
        for (k, v) in &self.params {
            if !["index", "url", "query", "text", "keys", "tab_id", "seconds"].contains(&k.as_str())
            {
                parts.push(format!("{k}={v}"));
            }
        }
        format!("{}({})", self.name, parts.join(", "))
    }
}

/// The result of mapping a Browser Use action to canonical form.
#[derive(Debug, Clone, PartialEq)]
pub struct Canonicalized {
    pub action: Action,
    /// Set when the name is unknown: the action is kept with its raw params.
    pub warning: Option<String>,
}

/// Maps a Browser Use action (any version's name and params) to canonical form.
/// Unknown names are kept as they are, with a warning.
// Kept whole: one arm per Browser Use action name (every version's), read as a
// table of renames.
pub fn canonicalize(name: &str, params: &Value) -> Canonicalized {
    let p = match params {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other.clone());
            m
        }
    };
    let rename = |new: &str, pairs: &[(&str, &str)]| {
        let mut out = p.clone();
        for (old, newk) in pairs {
            if let Some(v) = out.remove(*old) {
                out.entry(newk.to_string()).or_insert(v);
            }
        }
        Action {
            name: new.to_string(),
            params: out,
        }
    };
    let action = match name {
        n if CANONICAL_NAMES.contains(&n) && n != "scroll" => Action {
            name: n.to_string(),
            params: p.clone(),
        },
        "scroll" => {
            let mut a = Action {
                name: "scroll".into(),
                params: p.clone(),
            };
            a.params.entry("down").or_insert(json!(true));
            a
        }
        "go_to_url" => {
            let mut a = rename("navigate", &[]);
            a.params.entry("new_tab").or_insert(json!(false));
            a
        }
        "open_tab" => {
            let mut a = rename("navigate", &[]);
            a.params.insert("new_tab".into(), json!(true));
            a
        }
        "search_google" => {
            let mut a = rename("search", &[]);
            a.params.entry("engine").or_insert(json!("google"));
            a
        }
        "click_element_by_index" | "click_element" => rename("click", &[]),
        "input_text" => rename("input", &[]),
        "scroll_down" | "scroll_up" => {
            let mut a = rename("scroll", &[]);
            a.params.insert("down".into(), json!(name == "scroll_down"));
            a
        }
        "switch_tab" => rename("switch", &[("page_id", "tab_id"), ("target_id", "tab_id")]),
        "close_tab" => rename("close", &[("page_id", "tab_id"), ("target_id", "tab_id")]),
        "extract_content" => rename("extract", &[("goal", "query")]),
        "extract_structured_data" => rename("extract", &[]),
        "select_dropdown_option" => rename("select_dropdown", &[]),
        "get_dropdown_options" => rename("dropdown_options", &[]),
        "upload_file_to_element" => rename("upload_file", &[]),
        "scroll_to_text" => rename("find_text", &[]),
        _ => {
            return Canonicalized {
                action: Action {
                    name: name.to_string(),
                    params: p,
                },
                warning: Some(format!(
                    "unknown action name `{name}`: kept with its raw params"
                )),
            };
        }
    };
    Canonicalized {
        action,
        warning: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_map_to_canonical_ones() {
        let c = canonicalize("go_to_url", &json!({"url": "https://a.test"}));
        assert_eq!(c.action.name, "navigate");
        assert_eq!(c.action.params["new_tab"], json!(false));
        let c = canonicalize("open_tab", &json!({"url": "https://a.test"}));
        assert_eq!(c.action.params["new_tab"], json!(true));
        let c = canonicalize("scroll_up", &json!({"amount": 300}));
        assert_eq!(c.action.name, "scroll");
        assert_eq!(c.action.params["down"], json!(false));
        assert_eq!(c.action.params["amount"], json!(300));
        let c = canonicalize("switch_tab", &json!({"page_id": 2}));
        assert_eq!(c.action.params["tab_id"], json!(2));
        let c = canonicalize("extract_content", &json!({"goal": "prices"}));
        assert_eq!(c.action.name, "extract");
        assert_eq!(c.action.params["query"], json!("prices"));
        assert!(c.warning.is_none());
    }

    #[test]
    fn unknown_names_are_kept_with_a_warning() {
        let c = canonicalize("drag_and_drop", &json!({"from": 1, "to": 2}));
        assert_eq!(c.action.name, "drag_and_drop");
        assert_eq!(c.action.params["to"], json!(2));
        assert!(c.warning.unwrap().contains("drag_and_drop"));
    }

    #[test]
    fn browser_use_0_13_names_are_canonical_and_coordinate_clicks_have_a_point() {
        for name in [
            "search_page",
            "find_elements",
            "evaluate",
            "write_file",
            "save_as_pdf",
        ] {
            let c = canonicalize(name, &json!({}));
            assert!(c.warning.is_none() && c.action.is_known(), "{name}");
        }
        let click = Action::new("click", json!({"coordinate_x": 120, "coordinate_y": "60"}));
        assert_eq!(click.point(), Some((120.0, 60.0)));
        assert_eq!(click.target_index(), None);
        assert_eq!(Action::new("click", json!({"index": 3})).point(), None);
    }

    #[test]
    fn short_form_is_readable() {
        let a = Action::new("input", json!({"index": 5, "text": "alice"}));
        assert_eq!(a.short(), "input(5, \"alice\")");
        assert_eq!(a.target_index(), Some(5));
    }
}
