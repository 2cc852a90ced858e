//! Parameter checks of canonical actions: what a click or a navigate must carry for
//! a browser to execute it. Importers refuse, and `validate` reports, an action whose
//! parameters are missing or of the wrong type (a click without an index, with
//! `"index": null` or `"NaN"`, a navigate with `"url": 12`) instead of storing it.
//! Unknown action names are not checked (they are kept with a warning elsewhere).

use super::Action;
use serde_json::Value;

/// A parameter that is missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The parameter's name (`index`, `url`, ...).
    pub key: String,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// An element index: an integer 0..=u32::MAX (`12`, `12.0` or `"12"`).
    Index,
    /// A tab id: a string or a non-negative integer.
    TabId,
    Str,
    Bool,
    /// A finite number.
    Number,
}

impl Kind {
    fn want(self) -> &'static str {
        match self {
            Kind::Index => "an element index (a whole number from 0 to 4294967295)",
            Kind::TabId => "a tab id (a string or a whole number)",
            Kind::Str => "a string",
            Kind::Bool => "true or false",
            Kind::Number => "a finite number",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Kind::Index => index_value(v).is_some(),
            Kind::TabId => v.is_string() || index_value(v).is_some(),
            Kind::Str => v.is_string(),
            Kind::Bool => {
                v.is_boolean() || matches!(v.as_str().map(str::trim), Some("true" | "false"))
            }
            Kind::Number => v.as_f64().is_some_and(f64::is_finite),
        }
    }
}

/// An element index from a JSON value: a whole number that fits `u32`, written as an
/// integer, an integral float or a numeric string. Nothing is cast: `2^32 + 3` is
/// no index at all, not index 3.
pub fn index_value(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(u) => u32::try_from(u).ok(),
            None if n.is_f64() => {
                let f = n.as_f64()?;
                (f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&f)).then_some(f as u32)
            }
            None => None,
        },
        Value::String(s) => s.trim().parse::<u32>().ok(),
        _ => None,
    }
}

/// Parameter names with the kind of value each takes.
type Params = &'static [(&'static str, Kind)];

/// Required and optional parameters of each known action.
fn spec(name: &str) -> Option<(Params, Params)> {
    use Kind::*;
    Some(match name {
        "navigate" => (&[("url", Str)], &[("new_tab", Bool)]),
        "search" => (&[("query", Str)], &[("engine", Str)]),
        // A click names an element, or (0.13) a point: see `check_params`.
        "click" => (
            &[],
            &[
                ("index", Index),
                ("coordinate_x", Number),
                ("coordinate_y", Number),
            ],
        ),
        "input" => (&[("index", Index), ("text", Str)], &[("clear", Bool)]),
        "scroll" => (&[], &[("down", Bool), ("pages", Number), ("index", Index)]),
        "send_keys" => (&[("keys", Str)], &[]),
        "switch" | "close" => (&[("tab_id", TabId)], &[]),
        "go_back" | "screenshot" | "save_as_pdf" => (&[], &[]),
        "wait" => (&[], &[("seconds", Number)]),
        "extract" => (&[], &[("query", Str)]),
        "select_dropdown" => (&[("index", Index), ("text", Str)], &[]),
        "dropdown_options" => (&[("index", Index)], &[]),
        "upload_file" => (&[("index", Index), ("path", Str)], &[]),
        "find_text" => (&[("text", Str)], &[]),
        "done" => (&[], &[("text", Str), ("success", Bool)]),
        "search_page" => (&[], &[("pattern", Str)]),
        "find_elements" => (&[], &[("selector", Str)]),
        "evaluate" => (&[], &[("code", Str)]),
        "write_file" | "replace_file" | "read_file" => (&[], &[("file_name", Str)]),
        _ => return None,
    })
}

/// Checks the parameters of a known action; unknown names pass.
pub fn check_params(a: &Action) -> Result<(), ParamError> {
    let Some((required, optional)) = spec(&a.name) else {
        return Ok(());
    };
    let bad = |key: &str, message: String| ParamError {
        key: key.to_string(),
        message,
    };
    for (key, kind) in required {
        match a.params.get(*key) {
            None => {
                return Err(bad(
                    key,
                    format!("`{}` needs `{key}`: {}", a.name, kind.want()),
                ));
            }
            Some(v) if !kind.accepts(v) => {
                return Err(bad(
                    key,
                    format!("expected {}, found {}", kind.want(), shown(v)),
                ));
            }
            Some(_) => {}
        }
    }
    for (key, kind) in optional {
        // `null` stands for "not given" in Browser Use's model output.
        if let Some(v) = a.params.get(*key).filter(|v| !v.is_null())
            && !kind.accepts(v)
        {
            return Err(bad(
                key,
                format!("expected {}, found {}", kind.want(), shown(v)),
            ));
        }
    }
    if a.name == "click" {
        let has = |k: &str| a.params.get(k).is_some_and(|v| !v.is_null());
        if !(has("index") || has("coordinate_x") && has("coordinate_y")) {
            return Err(bad(
                "index",
                format!(
                    "`click` needs `index` ({}) or both `coordinate_x` and `coordinate_y`, found {}",
                    Kind::Index.want(),
                    a.params.get("index").map_or("none".into(), shown)
                ),
            ));
        }
    }
    Ok(())
}

/// A JSON value for a message: its kind and, for short scalars, the value itself.
fn shown(v: &Value) -> String {
    let kind = crate::util::json_kind(v);
    match v {
        Value::String(s) if s.chars().count() <= 40 => {
            format!("{kind} {:?}", crate::util::sanitize::clean_line(s))
        }
        Value::Number(n) => format!("{kind} {n}"),
        _ => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(name: &str, params: Value) -> Result<(), ParamError> {
        check_params(&Action::new(name, params))
    }

    #[test]
    fn clicks_need_a_real_index_or_a_point() {
        assert!(check("click", json!({"index": 12})).is_ok());
        assert!(check("click", json!({"index": "12"})).is_ok());
        assert!(check("click", json!({"index": 12.0})).is_ok());
        assert!(check("click", json!({"coordinate_x": 10, "coordinate_y": 20.5})).is_ok());
        for bad in [
            json!({}),
            json!({"index": null}),
            json!({"index": "NaN"}),
            json!({"index": -1}),
            json!({"index": 1.5}),
            json!({"index": 4_294_967_299u64}),
            json!({"index": true}),
        ] {
            let e = check("click", bad.clone()).unwrap_err();
            assert_eq!(e.key, "index", "{bad}");
        }
    }

    #[test]
    fn required_and_typed_parameters() {
        let e = check("navigate", json!({"url": 12})).unwrap_err();
        assert_eq!(e.key, "url");
        assert!(
            e.message.contains("expected a string, found a number 12"),
            "{}",
            e.message
        );
        assert!(
            check(
                "navigate",
                json!({"url": "https://a.test", "new_tab": false})
            )
            .is_ok()
        );
        assert_eq!(check("input", json!({"index": 3})).unwrap_err().key, "text");
        assert_eq!(
            check("switch", json!({"tab_id": [1]})).unwrap_err().key,
            "tab_id"
        );
        assert!(check("switch", json!({"tab_id": "a1b2"})).is_ok());
        assert_eq!(
            check("wait", json!({"seconds": "soon"})).unwrap_err().key,
            "seconds"
        );
        assert!(check("done", json!({"text": "42", "success": "true"})).is_ok());
        assert!(check("go_back", json!({})).is_ok());
        assert!(check("hover_element", json!({"index": "x"})).is_ok());
    }

    #[test]
    fn indices_are_never_cast() {
        assert_eq!(index_value(&json!(4_294_967_295u64)), Some(u32::MAX));
        assert_eq!(index_value(&json!(4_294_967_299u64)), None);
        assert_eq!(index_value(&json!(-3)), None);
        assert_eq!(index_value(&json!(" 7 ")), Some(7));
    }
}
