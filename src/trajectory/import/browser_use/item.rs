//! One history item read into a step: model output, state, results, timing; errors
//! name the item and the field.

use super::extras::*;
use crate::action::canonicalize;
#[cfg(doc)]
use crate::trajectory::Outcome;
use crate::trajectory::import::ImportError;
use crate::trajectory::import::dom_text;
use crate::trajectory::import::screenshot::ShotSource;
use crate::trajectory::{ActionResult, ModelOutput, State, Step, Tab, Timing};
use crate::util::json_kind;
use serde_json::{Map, Value};
use std::path::Path;

/// One history item being read: knows its place for error messages.
pub(super) struct Item<'a> {
    pub(super) file: &'a Path,
    pub(super) index: usize,
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

    pub(super) fn step(
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
            crate::trajectory::import::text_limit::check_text_len(msg.len())
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
