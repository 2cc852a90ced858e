//! Browser Use agent histories (`{"history": [item]}`) of every layout, read into
//! steps. This module does no I/O: screenshots come back as [`ShotSource`]s that the
//! caller checks, copies and names.
//!
//! Layouts handled: `model_output.current_state{evaluation_previous_goal, memory,
//! next_goal}` (<=0.3.1) and the flat form with `thinking` (>=0.3.2); inline base64
//! `state.screenshot` (<=0.5.7) and `state.screenshot_path`; tabs keyed by `page_id`
//! (<=0.5), `target_id` or `tab_id`; `state_message` (0.8+), whose element list becomes
//! `state.elements` and `state.dom_text`. Elements the agent interacted with
//! (`state.interacted_element`) are added when the element list lacks them, so
//! histories without a state message still know their targets.
//!
//! Browser Use 0.13 (measured on its own histories, see `tests/data/browser_use/`):
//! item 0 is the harness's "Initial Actions" navigation to the task's URL (no state
//! message, no screenshot, next goal "Initial navigation"): it is kept as a
//! [`Step::synthetic`] step, not a model step. `state_message` is kept verbatim and
//! also read for the page text outside elements, the current tab and the scroll
//! position. An `extract` result's `<url>…</url><query>…</query><result>…</result>`
//! wrapper is cut down to the result. Every field with no place in the step
//! (plan fields, `long_term_memory`, result `metadata` and `attachments`, tab
//! `parent_target_id`, `metadata.step_number`, ...) is kept in [`Step::extra`] in the
//! item's own layout; the judge's whole verdict goes to the outcome's `extra`.

use super::ImportError;
use super::dom_text;
use crate::action::{Action, canonicalize};
#[cfg(doc)]
use crate::trajectory::Outcome;
use crate::trajectory::{ActionResult, Element, ModelOutput, State, Step, Tab, Timing};
use crate::util::json_kind;
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

pub use super::screenshot::ShotSource;

/// The final `done` action of a history.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneInfo {
    /// `success` of the done action (or of its result), if either said.
    pub success: Option<bool>,
    /// The done text (the agent's final answer).
    pub text: Option<String>,
}

/// A history read into steps, before screenshots are copied.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedHistory {
    pub steps: Vec<Step>,
    /// One entry per step.
    pub shots: Vec<Option<ShotSource>>,
    /// Set when the last step with actions ends in `done`.
    pub done: Option<DoneInfo>,
    /// The judge's verdict on the run (`result[].judgement`, 0.9+), if it has one.
    pub judgement: Option<Judgement>,
    /// Non-fatal findings (unknown action names, ...), already prefixed with their place.
    pub warnings: Vec<String>,
}

/// Reads a history from its JSON bytes. `file` is only used in messages.
pub fn parse_history_bytes(bytes: &[u8], file: &Path) -> Result<ParsedHistory, ImportError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ImportError {
        file: file.to_path_buf(),
        location: format!("line {} column {}", e.line(), e.column()),
        field: "(json)".into(),
        message: format!("malformed JSON: {e}"),
    })?;
    parse_history(&value, file)
}

/// Reads a history from a parsed JSON value.
pub fn parse_history(value: &Value, file: &Path) -> Result<ParsedHistory, ImportError> {
    let top = |field: &str, message: String| ImportError {
        file: file.to_path_buf(),
        location: "(top level)".into(),
        field: field.into(),
        message,
    };
    let obj = value.as_object().ok_or_else(|| {
        top(
            "(record)",
            format!(
                "expected an object with `history`, found {}",
                json_kind(value)
            ),
        )
    })?;
    let items = match obj.get("history") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(top(
                "history",
                format!("expected a list, found {}", json_kind(other)),
            ));
        }
        None => {
            return Err(top(
                "history",
                "missing field (is this a Browser Use history?)".into(),
            ));
        }
    };
    if items.is_empty() {
        return Err(top("history", "the history has no items".into()));
    }
    let mut out = ParsedHistory {
        steps: Vec::with_capacity(items.len()),
        shots: Vec::with_capacity(items.len()),
        done: None,
        judgement: None,
        warnings: Vec::new(),
    };
    let mut prev_memory = String::new();
    for (i, item) in items.iter().enumerate() {
        let cx = Item { file, index: i };
        let (mut step, shot) = cx.step(item, &mut out.warnings)?;
        step.state.memory = std::mem::take(&mut prev_memory);
        prev_memory = step.output.memory.clone();
        out.steps.push(step);
        out.shots.push(shot);
    }
    out.done = final_done(&out.steps);
    out.judgement = items.last().and_then(judgement_of);
    Ok(out)
}

/// An LLM judge's verdict on a whole run, stored by Browser Use in the final result.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: bool,
    /// `failure_reason`, else `reasoning`.
    pub reason: Option<String>,
    /// The whole `judgement` object as written (`reasoning`, `failure_reason`,
    /// `impossible_task`, `reached_captcha`, ...), for [`Outcome::extra`].
    pub raw: Map<String, Value>,
}

/// The last `judgement` with a boolean `verdict` among an item's results (lenient:
/// anything else is ignored).
fn judgement_of(item: &Value) -> Option<Judgement> {
    let results = item.get("result")?.as_array()?;
    results.iter().rev().find_map(|r| {
        let j = r.get("judgement")?.as_object()?;
        let verdict = j.get("verdict")?.as_bool()?;
        let text = |k: &str| {
            j.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
        };
        Some(Judgement {
            verdict,
            reason: text("failure_reason").or_else(|| text("reasoning")),
            raw: j.clone(),
        })
    })
}

/// The `done` of the last step that has actions, with `success` taken from its params
/// or, failing that, from the step's final result.
fn final_done(steps: &[Step]) -> Option<DoneInfo> {
    let step = steps.iter().rev().find(|s| !s.output.actions.is_empty())?;
    let done = step
        .output
        .actions
        .iter()
        .rev()
        .find(|a| a.name == "done")?;
    let result_success = step
        .result
        .iter()
        .rev()
        .find(|r| r.is_done)
        .and_then(|r| r.success);
    Some(DoneInfo {
        success: done.bool_param("success").or(result_success),
        text: done.str_param("text").map(str::to_owned).or_else(|| {
            step.result
                .iter()
                .rev()
                .find(|r| r.is_done)
                .and_then(|r| r.extracted_content.clone())
        }),
    })
}

/// One history item being read: knows its place for error messages.
struct Item<'a> {
    file: &'a Path,
    index: usize,
}

impl Item<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ImportError {
        ImportError {
            file: self.file.to_path_buf(),
            location: format!("history[{}]", self.index),
            field: field.into(),
            message: message.into(),
        }
    }

    fn mistyped(&self, field: &str, want: &str, got: &Value) -> ImportError {
        self.err(field, format!("expected {want}, found {}", json_kind(got)))
    }

    /// An optional string: absent or null gives `None`.
    fn opt_str(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<String>, ImportError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.mistyped(field, "a string", other)),
        }
    }

    fn opt_bool(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<bool>, ImportError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.mistyped(field, "true or false", other)),
        }
    }

    fn opt_f64(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<Option<f64>, ImportError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(self.mistyped(field, "a number", other)),
        }
    }

    fn step(
        &self,
        item: &Value,
        warnings: &mut Vec<String>,
    ) -> Result<(Step, Option<ShotSource>), ImportError> {
        let obj = item
            .as_object()
            .ok_or_else(|| self.mistyped("(item)", "an object", item))?;
        let output = match obj.get("model_output") {
            None => return Err(self.err("model_output", "missing field (null is allowed)")),
            Some(Value::Null) => ModelOutput::default(),
            Some(Value::Object(m)) => self.model_output(m, warnings)?,
            Some(other) => return Err(self.mistyped("model_output", "an object or null", other)),
        };
        let result = match obj.get("result") {
            None => return Err(self.err("result", "missing field")),
            Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(j, r)| self.result(r, j))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(self.mistyped("result", "a list", other)),
        };
        let state_obj = match obj.get("state") {
            None => return Err(self.err("state", "missing field")),
            Some(Value::Object(m)) => m,
            Some(other) => return Err(self.mistyped("state", "an object", other)),
        };
        let (mut state, shot) = self.state(state_obj)?;
        let state_message = self.opt_str(obj, "state_message", "state_message")?;
        if let Some(msg) = &state_message {
            super::text_limit::check_text_len(msg.len())
                .map_err(|m| self.err("state_message", m))?;
            let section = dom_text::browser_state_section(msg);
            let page = dom_text::parse_page(section);
            state.elements = page.elements;
            state.page_text = page.page_text;
            state.current_tab = page.current_tab;
            state.scroll = page.scroll;
            state.dom_text = section.to_string();
        }
        add_interacted(state_obj, &output.actions, &mut state.elements);
        let timing = match obj.get("metadata") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => {
                let start = self.opt_f64(m, "step_start_time", "metadata.step_start_time")?;
                let end = self.opt_f64(m, "step_end_time", "metadata.step_end_time")?;
                match (start, end) {
                    (Some(start), Some(end)) => Some(Timing { start, end }),
                    (Some(t), None) | (None, Some(t)) => Some(Timing { start: t, end: t }),
                    (None, None) => None,
                }
            }
            Some(other) => return Err(self.mistyped("metadata", "an object or null", other)),
        };
        let synthetic = self.index == 0
            && state_message.is_none()
            && shot.is_none()
            && (state.title == "Initial Actions" || output.next_goal == "Initial navigation");
        let mut extra = residual(obj);
        let mut result = result;
        strip_extraction_wrappers(&output.actions, &mut result, &mut extra);
        state.state_message = state_message;
        let step = Step {
            index: u32::try_from(self.index)
                .map_err(|_| self.err("(item)", "too many history items"))?,
            state,
            output,
            result,
            timing,
            synthetic,
            extra,
        };
        Ok((step, shot))
    }

    fn model_output(
        &self,
        m: &Map<String, Value>,
        warnings: &mut Vec<String>,
    ) -> Result<ModelOutput, ImportError> {
        let mut out = ModelOutput::default();
        // <=0.3.1 nests the brain fields in `current_state`; later versions are flat.
        let (brain, prefix) = match m.get("current_state") {
            Some(Value::Object(cs)) => (cs, "model_output.current_state."),
            None | Some(Value::Null) => (m, "model_output."),
            Some(other) => {
                return Err(self.mistyped("model_output.current_state", "an object", other));
            }
        };
        let s = |key: &str| self.opt_str(brain, key, &format!("{prefix}{key}"));
        out.thinking = s("thinking")?.unwrap_or_default();
        out.evaluation_previous_goal = s("evaluation_previous_goal")?.unwrap_or_default();
        out.memory = s("memory")?.unwrap_or_default();
        out.next_goal = s("next_goal")?.unwrap_or_default();
        if out.thinking.is_empty()
            && let Some(t) = self.opt_str(m, "thinking", "model_output.thinking")?
        {
            out.thinking = t;
        }
        let actions = match m.get("action") {
            None | Some(Value::Null) => &Vec::new(),
            Some(Value::Array(a)) => a,
            Some(other) => return Err(self.mistyped("model_output.action", "a list", other)),
        };
        for (j, a) in actions.iter().enumerate() {
            let field = format!("model_output.action[{j}]");
            let obj = a
                .as_object()
                .ok_or_else(|| self.mistyped(&field, "an object like {\"click\": {...}}", a))?;
            // Some versions dump every action field with null for the unused ones.
            let set: Vec<(&String, &Value)> = obj.iter().filter(|(_, v)| !v.is_null()).collect();
            let (name, params) = match set.as_slice() {
                [one] => *one,
                [] if obj.len() == 1 => obj
                    .iter()
                    .next()
                    .ok_or_else(|| self.err(&field, "empty action"))?,
                [] => return Err(self.err(&field, "no action name in this object")),
                more => {
                    let names: Vec<&str> = more.iter().map(|(k, _)| k.as_str()).collect();
                    return Err(self.err(
                        &field,
                        format!("one action expected, found several: {}", names.join(", ")),
                    ));
                }
            };
            if !(params.is_object() || params.is_null()) {
                return Err(self.mistyped(
                    &format!("{field}.{name}"),
                    "an object of parameters",
                    params,
                ));
            }
            let c = canonicalize(name, params);
            crate::action::check::check_params(&c.action)
                .map_err(|e| self.err(&format!("{field}.{name}.{}", e.key), e.message))?;
            if let Some(w) = c.warning {
                warnings.push(format!(
                    "{}: history[{}]: {field}: {w}",
                    self.file.display(),
                    self.index
                ));
            }
            out.actions.push(c.action);
        }
        Ok(out)
    }

    fn result(&self, r: &Value, j: usize) -> Result<ActionResult, ImportError> {
        let field = format!("result[{j}]");
        let m = r
            .as_object()
            .ok_or_else(|| self.mistyped(&field, "an object", r))?;
        Ok(ActionResult {
            is_done: self
                .opt_bool(m, "is_done", &format!("{field}.is_done"))?
                .unwrap_or(false),
            success: self.opt_bool(m, "success", &format!("{field}.success"))?,
            error: self.opt_str(m, "error", &format!("{field}.error"))?,
            extracted_content: self.opt_str(
                m,
                "extracted_content",
                &format!("{field}.extracted_content"),
            )?,
        })
    }

    fn state(&self, m: &Map<String, Value>) -> Result<(State, Option<ShotSource>), ImportError> {
        let mut state = State {
            url: self.opt_str(m, "url", "state.url")?.unwrap_or_default(),
            title: self.opt_str(m, "title", "state.title")?.unwrap_or_default(),
            ..State::default()
        };
        match m.get("tabs") {
            None | Some(Value::Null) => {}
            Some(Value::Array(tabs)) => {
                for (j, t) in tabs.iter().enumerate() {
                    state.tabs.push(self.tab(t, j)?);
                }
            }
            Some(other) => return Err(self.mistyped("state.tabs", "a list", other)),
        }
        let inline = self.opt_str(m, "screenshot", "state.screenshot")?;
        let path = self.opt_str(m, "screenshot_path", "state.screenshot_path")?;
        let shot = match (inline, path) {
            (Some(b64), _) if !b64.trim().is_empty() => Some(ShotSource::Inline(
                decode_base64(&b64).map_err(|e| self.err("state.screenshot", e))?,
            )),
            (_, Some(p)) if !p.trim().is_empty() => Some(ShotSource::Path(p)),
            _ => None,
        };
        Ok((state, shot))
    }

    fn tab(&self, t: &Value, j: usize) -> Result<Tab, ImportError> {
        let field = format!("state.tabs[{j}]");
        let m = t
            .as_object()
            .ok_or_else(|| self.mistyped(&field, "an object", t))?;
        let id = ["target_id", "page_id", "tab_id", "id"]
            .iter()
            .find_map(|k| match m.get(*k) {
                Some(Value::String(s)) => Some(Ok(s.clone())),
                Some(Value::Number(n)) => Some(Ok(n.to_string())),
                None | Some(Value::Null) => None,
                Some(other) => Some(Err(self.mistyped(
                    &format!("{field}.{k}"),
                    "a string or number",
                    other,
                ))),
            })
            .transpose()?
            .unwrap_or_else(|| j.to_string());
        Ok(Tab {
            id,
            url: self
                .opt_str(m, "url", &format!("{field}.url"))?
                .unwrap_or_default(),
            title: self
                .opt_str(m, "title", &format!("{field}.title"))?
                .unwrap_or_default(),
        })
    }
}

/// What of a history item has no place in [`Step`]: the item without the fields
/// the importer maps (and without the inline screenshot, the recorded screenshot
/// path, the state message kept verbatim in the state, and the judgement kept in
/// the outcome), with nulls and empty objects and lists pruned. Lists keep their
/// positions (`result[1]` stays the second entry) as long as any entry has
/// something left.
fn residual(item: &Map<String, Value>) -> Map<String, Value> {
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
fn prune(v: &mut Value) -> bool {
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
fn strip_extraction_wrappers(
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
fn extraction_result(text: &str) -> Option<&str> {
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
fn add_interacted(m: &Map<String, Value>, actions: &[Action], elements: &mut Vec<Element>) {
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
fn rect_of(e: &Map<String, Value>) -> [f64; 4] {
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
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ParsedHistory, ImportError> {
        parse_history(&v, Path::new("h.json"))
    }

    #[test]
    fn nested_layout_and_memory_shift() {
        let h = parse(json!({"history": [
            {"model_output": {"current_state": {"evaluation_previous_goal": "Start", "memory": "m1", "next_goal": "open"},
              "action": [{"go_to_url": {"url": "https://a.test"}}]},
             "result": [{"is_done": false}], "state": {"url": "about:blank", "title": "", "tabs": [{"page_id": 0, "url": "about:blank", "title": ""}]}},
            {"model_output": {"current_state": {"evaluation_previous_goal": "ok", "memory": "m2", "next_goal": "finish"},
              "action": [{"done": {"text": "42", "success": true}}]},
             "result": [{"is_done": true, "success": true, "extracted_content": "42"}], "state": {"url": "https://a.test", "title": "A"}}
        ]}))
        .unwrap();
        assert_eq!(h.steps[0].output.actions[0].name, "navigate");
        assert_eq!(h.steps[0].state.memory, "");
        assert_eq!(h.steps[1].state.memory, "m1");
        assert_eq!(h.steps[1].output.memory, "m2");
        assert_eq!(h.steps[0].state.tabs[0].id, "0");
        assert_eq!(
            h.done,
            Some(DoneInfo {
                success: Some(true),
                text: Some("42".into())
            })
        );
    }

    #[test]
    fn errors_name_item_and_field() {
        let e =
            parse(json!({"history": [{"model_output": null, "result": [], "state": {"url": 5}}]}))
                .unwrap_err();
        assert_eq!(e.location, "history[0]");
        assert_eq!(e.field, "state.url");
        let e = parse(json!({"history": [{"model_output": null, "result": [], "state": {"screenshot": "@@@"}}]})).unwrap_err();
        assert_eq!(e.field, "state.screenshot");
        let e = parse(json!({"history": [{"model_output": null, "state": {}}]})).unwrap_err();
        assert_eq!(e.field, "result");
    }

    #[test]
    fn interacted_elements_take_the_action_index_when_they_have_none() {
        let h = parse(json!({"history": [{
            "model_output": {"action": [{"navigate": {"url": "https://a.test"}}, {"click": {"index": 9}}]},
            "result": [],
            "state": {"url": "https://a.test", "interacted_element": [null, {
                "node_id": 5, "backend_node_id": 6, "frame_id": null, "node_type": 1, "node_value": "",
                "node_name": "BUTTON", "attributes": {"type": "submit"}, "x_path": "html/body/button",
                "element_hash": 1, "ax_name": "Log in", "bounds": {"x": 1.0, "y": 2.0, "width": 3.0, "height": 4.0}}]}
        }]}))
        .unwrap();
        let e = h.steps[0].state.element(9).unwrap();
        assert_eq!(
            (e.tag.as_str(), e.role.as_str(), e.text.as_str()),
            ("button", "button", "Log in")
        );
        assert_eq!(e.bbox, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn null_padded_action_objects_and_unknown_names() {
        let h = parse(json!({"history": [{"model_output": {"action": [
            {"click_element": {"index": 3}, "input_text": null},
            {"hover_element": {"index": 4}}
        ]}, "result": [], "state": {}}]}))
        .unwrap();
        assert_eq!(h.steps[0].output.actions[0].name, "click");
        assert_eq!(h.steps[0].output.actions[1].name, "hover_element");
        assert_eq!(h.warnings.len(), 1);
        assert!(h.done.is_none());
    }
}
