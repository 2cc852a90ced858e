//! What an item carries besides its step: the fields with no place in it (kept as
//! `extra`), extraction wrappers, interacted elements, base64 screenshots.

use crate::action::Action;
#[cfg(doc)]
use crate::trajectory::Outcome;
use crate::trajectory::import::dom_text;
use crate::trajectory::{ActionResult, Element};
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// What of a history item has no place in [`Step`]: the item without the fields
/// the importer maps (and without the inline screenshot, the recorded screenshot
/// path, the state message kept verbatim in the state, and the judgement kept in
/// the outcome), with nulls and empty objects and lists pruned. Lists keep their
/// positions (`result[1]` stays the second entry) as long as any entry has
/// something left.
pub(super) fn residual(item: &Map<String, Value>) -> Map<String, Value> {
    let mut out = item.clone();
    out.remove("state_message");
    let strip = |v: Option<&mut Value>, keys: &[&str]| {
        if let Some(Value::Object(m)) = v {
            for k in keys {
                m.remove(*k);
            }
        }
    };
    const BRAIN: &[&str] = &[
        "thinking",
        "evaluation_previous_goal",
        "memory",
        "next_goal",
    ];
    if let Some(Value::Object(mo)) = out.get_mut("model_output") {
        strip(mo.get_mut("current_state"), BRAIN);
        for k in BRAIN.iter().chain(&["action"]) {
            mo.remove(*k);
        }
    }
    if let Some(Value::Array(results)) = out.get_mut("result") {
        for r in results {
            strip(
                Some(r),
                &[
                    "is_done",
                    "success",
                    "error",
                    "extracted_content",
                    "judgement",
                ],
            );
        }
    }
    if let Some(Value::Object(st)) = out.get_mut("state") {
        for k in ["url", "title", "screenshot", "screenshot_path"] {
            st.remove(k);
        }
        if let Some(Value::Array(tabs)) = st.get_mut("tabs") {
            for t in tabs {
                strip(
                    Some(t),
                    &["target_id", "page_id", "tab_id", "id", "url", "title"],
                );
            }
        }
    }
    strip(
        out.get_mut("metadata"),
        &["step_start_time", "step_end_time"],
    );
    out.retain(|_, v| prune(v));
    out
}

/// Prunes nulls and emptied objects and lists inside `v`; false when nothing is left.
pub(super) fn prune(v: &mut Value) -> bool {
    match v {
        Value::Null => false,
        Value::Object(m) => {
            m.retain(|_, x| prune(x));
            !m.is_empty()
        }
        Value::Array(a) => {
            let mut any = false;
            for x in a.iter_mut() {
                if !prune(x) {
                    *x = Value::Null;
                } else {
                    any = true;
                }
            }
            any
        }
        _ => true,
    }
}

/// Cuts Browser Use's `<url>…</url><query>…</query><result>…</result>` wrapper off
/// the content of `extract` results, keeping the text as written in
/// `extra.result[j].extracted_content`.
pub(super) fn strip_extraction_wrappers(
    actions: &[Action],
    results: &mut [ActionResult],
    extra: &mut Map<String, Value>,
) {
    for (j, (a, r)) in actions.iter().zip(results.iter_mut()).enumerate() {
        if a.name != "extract" {
            continue;
        }
        let Some(inner) = r
            .extracted_content
            .as_deref()
            .and_then(extraction_result)
            .map(str::to_owned)
        else {
            continue;
        };
        let raw = r.extracted_content.replace(inner);
        let slot = extra
            .entry("result")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = slot {
            if list.len() <= j {
                list.resize(j + 1, Value::Null);
            }
            if !list[j].is_object() {
                list[j] = Value::Object(Map::new());
            }
            if let (Value::Object(m), Some(raw)) = (&mut list[j], raw) {
                m.insert("extracted_content".into(), Value::String(raw));
            }
        }
    }
}

/// The inside of `<result>…</result>` when `text` is an extraction wrapper (it
/// starts with `<url>` or `<query>`).
pub(super) fn extraction_result(text: &str) -> Option<&str> {
    let t = text.trim_start();
    if !(t.starts_with("<url>") || t.starts_with("<query>")) {
        return None;
    }
    let start = t.find("<result>")? + "<result>".len();
    let end = t.rfind("</result>").filter(|&e| e >= start)?;
    Some(t[start..end].trim_matches('\n'))
}

/// Adds the elements this step's actions touched (`state.interacted_element`, one
/// entry or null per action) that the element list does not already have, and fills
/// the box of those it has. The index is the entry's `highlight_index` (<=0.7) or,
/// since 0.8 entries carry none, the index its action targeted. Malformed entries
/// are skipped: they only enrich the record.
pub(super) fn add_interacted(
    m: &Map<String, Value>,
    actions: &[Action],
    elements: &mut Vec<Element>,
) {
    let Some(Value::Array(list)) = m.get("interacted_element") else {
        return;
    };
    for (j, e) in list.iter().enumerate() {
        let Some(e) = e.as_object() else { continue };
        let own = ["highlight_index", "index"]
            .iter()
            .find_map(|k| e.get(*k).and_then(Value::as_u64));
        let from_action = actions.get(j).and_then(Action::target_index);
        let Some(index) = own
            .and_then(|i| u32::try_from(i).ok())
            .or_else(|| from_action.and_then(|i| u32::try_from(i).ok()))
        else {
            continue;
        };
        let tag = e
            .get("tag_name")
            .or_else(|| e.get("node_name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        let attrs: BTreeMap<String, String> = e
            .get("attributes")
            .and_then(Value::as_object)
            .map(|a| {
                a.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let bbox = rect_of(e);
        if let Some(existing) = elements.iter_mut().find(|x| x.index == index) {
            if existing.bbox == [0.0; 4] {
                existing.bbox = bbox;
            }
            continue;
        }
        let role = attrs.get("role").cloned().unwrap_or_else(|| {
            dom_text::implicit_role(&tag, attrs.get("type").map(String::as_str)).into()
        });
        let text = ["ax_name", "node_value"]
            .iter()
            .find_map(|k| {
                e.get(*k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.trim().is_empty())
            })
            .unwrap_or_default()
            .trim()
            .to_string();
        elements.push(Element {
            index,
            tag,
            role,
            text,
            attrs,
            bbox,
        });
    }
    elements.sort_by_key(|e| e.index);
}

/// The box of an interacted element: `absolute_position` / `bounds` (`{x, y, width,
/// height}`, 0.6+) or `viewport_coordinates` / `page_coordinates` (`{top_left: {x,
/// y}, width, height}`, older versions); zeros when it has none.
pub(super) fn rect_of(e: &Map<String, Value>) -> [f64; 4] {
    let num = |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    for k in ["absolute_position", "bounds"] {
        if let Some(r) = e.get(k).and_then(Value::as_object) {
            return [num(r, "x"), num(r, "y"), num(r, "width"), num(r, "height")];
        }
    }
    for k in ["viewport_coordinates", "page_coordinates"] {
        if let Some(c) = e.get(k).and_then(Value::as_object) {
            let (x, y) = c
                .get("top_left")
                .and_then(Value::as_object)
                .map_or((0.0, 0.0), |tl| (num(tl, "x"), num(tl, "y")));
            return [x, y, num(c, "width"), num(c, "height")];
        }
    }
    [0.0; 4]
}

/// Decodes inline screenshot base64 (an optional `data:image/...;base64,` prefix and
/// line breaks are allowed).
pub(super) fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest.split_once(',').map_or(rest, |(_, b)| b),
        None => s,
    };
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let engines = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    let mut first_err = None;
    for e in engines {
        match e.decode(&clean) {
            Ok(b) => return Ok(b),
            Err(err) => {
                first_err.get_or_insert(err);
            }
        }
    }
    Err(format!(
        "not valid base64 ({})",
        first_err.map_or_else(String::new, |e| e.to_string())
    ))
}
