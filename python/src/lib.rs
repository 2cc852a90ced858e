//! `rmsweb_verl._native`: rmsweb's reward rubric, splice and Salvage-DS gates for
//! Python, through [`rmsweb::export::bridge`] — the same library calls the command
//! line makes, so every answer equals the CLI's. The Python package
//! (`rmsweb_verl/__init__.py`) wraps these in verl's signatures.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rmsweb::export::bridge;
use rmsweb::reward::RewardConfig;
use rmsweb::train::rl::groups::{GateConfig, Mode};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The rubric thresholds: the defaults, or a `reward.toml` read once per path.
fn reward_config(path: Option<&str>) -> PyResult<RewardConfig> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, RewardConfig>>> = OnceLock::new();
    let Some(p) = path else {
        return Ok(RewardConfig::default());
    };
    let p = PathBuf::from(p);
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(&p) {
        return Ok(c.clone());
    }
    let c = RewardConfig::load(&p).map_err(|e| value_error(format!("{e:#}")))?;
    map.insert(p, c.clone());
    Ok(c)
}

/// Scores `response` against `ground_truth` (JSON: one action or a list) in a state
/// with `elements` (JSON list, or None to skip element checks); returns
/// `(score, level, rule, reason)`.
#[pyfunction]
#[pyo3(signature = (response, ground_truth, elements=None, config=None))]
fn score(
    py: Python<'_>,
    response: &str,
    ground_truth: &str,
    elements: Option<&str>,
    config: Option<&str>,
) -> PyResult<(f64, String, String, String)> {
    let cfg = reward_config(config)?;
    let d = py
        .detach(|| bridge::score_json(response, ground_truth, elements, &cfg))
        .map_err(value_error)?;
    Ok((d.score, d.level.name().to_string(), d.rule, d.reason))
}

/// Puts `action` (JSON: one action or a list) in place of the response's action;
/// returns `(text, start, end)` with the new action at `text[start:end]` (characters).
#[pyfunction]
fn splice(response: &str, action: &str) -> PyResult<(String, usize, usize)> {
    let s = bridge::splice_json(response, action).map_err(value_error)?;
    let span = bridge::char_span(&s.text, s.action_span.clone());
    Ok((s.text, span.start, span.end))
}

/// The actions of `response` as JSON and their span `(start, end)` in characters, or
/// None when no action can be read.
#[pyfunction]
fn actions(response: &str) -> Option<(String, usize, usize)> {
    let (acts, bytes) = bridge::actions_of(response)?;
    let span = bridge::char_span(response, bytes);
    Some((
        serde_json::to_string(&acts).unwrap_or_default(),
        span.start,
        span.end,
    ))
}

/// Gate decisions of reward groups, as `rmsweb rl groups` prints them: a JSON object
/// `{"groups": [{mean, std, max, decision, advantages?}], "summary": {...}}`.
#[pyfunction]
#[pyo3(signature = (rewards, eps_sigma=0.10, r_comp=0.55, mode="salvage-ds"))]
fn gates(rewards: Vec<Vec<f64>>, eps_sigma: f64, r_comp: f64, mode: &str) -> PyResult<String> {
    let mode = Mode::from_name(mode)
        .ok_or_else(|| value_error(format!("mode `{mode}`: use one of {}", Mode::names(", "))))?;
    let cfg = GateConfig {
        eps_sigma,
        r_comp,
        mode,
    };
    let (lines, summary) = bridge::gate_groups(&rewards, &cfg).map_err(value_error)?;
    Ok(serde_json::json!({"groups": lines, "summary": summary}).to_string())
}

/// The RL modes, in rmsweb's order ([`Mode::ALL`]): the list `rmsweb_verl` checks
/// settings and command lines against.
#[pyfunction]
fn modes() -> Vec<&'static str> {
    Mode::ALL.map(Mode::name).to_vec()
}

/// Every `metrics.jsonl` key rmsweb knows ([`rmsweb::train::metric_keys::ALL`]): the
/// package's tests check the keys it writes against it.
#[pyfunction]
fn metric_keys() -> Vec<&'static str> {
    rmsweb::train::metric_keys::ALL.to_vec()
}

/// `(hard, mastered)` retained by the salvage rule `unit·⌊min(D, cap)/unit⌋`.
#[pyfunction]
#[pyo3(signature = (hard, mastered, unit=16, cap=64))]
fn salvage_mix(hard: usize, mastered: usize, unit: usize, cap: usize) -> (usize, usize) {
    bridge::salvage_mix(hard, mastered, unit, cap)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(score, m)?)?;
    m.add_function(wrap_pyfunction!(splice, m)?)?;
    m.add_function(wrap_pyfunction!(actions, m)?)?;
    m.add_function(wrap_pyfunction!(gates, m)?)?;
    m.add_function(wrap_pyfunction!(salvage_mix, m)?)?;
    m.add_function(wrap_pyfunction!(modes, m)?)?;
    m.add_function(wrap_pyfunction!(metric_keys, m)?)?;
    m.add("RMSWEB_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
