//! Unit records (`DIR/stages/<unit>.json`): written when a unit finishes, they carry
//! its key (the hash of its config and of its inputs' keys), the config hash, a
//! token naming this execution, the token of each input's record it read, the
//! outputs it wrote (relative to the recipe folder), its wall time and a summary the
//! report reads. A unit is up to date when its record has the current key, every
//! listed output exists and each input's record is still the one it read (an input
//! redone since, say after its outputs were deleted, makes it stale too).

use super::layout::Layout;
use super::plan::Unit;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a finished unit left behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub unit: String,
    pub stage: String,
    pub key: String,
    pub config_hash: String,
    /// Names this execution of the unit (a hash of unit, key and finish time).
    pub token: String,
    /// Input unit id → the token of its record when this unit ran.
    pub inputs: BTreeMap<String, String>,
    /// Files and folders written, relative to the recipe folder.
    pub outputs: Vec<String>,
    pub finished: String,
    pub elapsed_s: f64,
    /// Stage-specific figures (counts, pass@1, the checkpoint used, ...).
    #[serde(default)]
    pub summary: serde_json::Value,
}

impl Record {
    /// The record of `unit` having written `outputs`, reading the inputs whose
    /// records have `tokens`.
    pub fn new(
        unit: &Unit,
        tokens: &BTreeMap<String, String>,
        outputs: Vec<String>,
        elapsed_s: f64,
        summary: serde_json::Value,
    ) -> Record {
        let now = chrono::Utc::now();
        Record {
            unit: unit.id.clone(),
            stage: unit.stage().name().into(),
            key: unit.key.clone(),
            config_hash: unit.config_hash.clone(),
            token: super::plan::hash_of(&serde_json::json!({
                "unit": unit.id,
                "key": unit.key,
                "at": now.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
                "pid": std::process::id(),
            })),
            inputs: unit
                .inputs
                .iter()
                .map(|i| (i.clone(), tokens.get(i).cloned().unwrap_or_default()))
                .collect(),
            outputs,
            finished: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            elapsed_s,
            summary,
        }
    }
}

/// Reads a unit's record; `None` when there is none or it is unreadable (the unit
/// then runs again).
pub fn read(layout: &Layout, unit: &str) -> Option<Record> {
    load(layout, unit).ok().flatten()
}

/// Reads a unit's record through the bounded, regular-file-only reader: `Ok(None)`
/// when there is none, an error saying why when it is there but unreadable (a FIFO,
/// a device, too large, not a record).
pub fn load(layout: &Layout, unit: &str) -> Result<Option<Record>, String> {
    let path = layout.record(unit);
    let text = match crate::util::fs::read_record(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes a unit's record atomically.
pub fn write(layout: &Layout, r: &Record) -> Result<()> {
    let path = layout.record(&r.unit);
    let text = serde_json::to_string_pretty(r)?;
    crate::util::fs::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Removes a unit's record (before it runs again).
pub fn remove(layout: &Layout, unit: &str) -> Result<()> {
    let path = layout.record(unit);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Why a unit must run, or `None` when its record is current; `tokens` holds the
/// current record token of each unit before it in the plan.
pub fn stale_reason(
    layout: &Layout,
    unit: &Unit,
    tokens: &BTreeMap<String, String>,
) -> Option<String> {
    let r = match load(layout, &unit.id) {
        Ok(Some(r)) => r,
        Ok(None) => return Some("not run yet".into()),
        Err(e) => {
            return Some(format!(
                "its record is unreadable ({})",
                crate::util::sanitize::clean_line(&e)
            ));
        }
    };
    if r.key != unit.key {
        return Some(if r.config_hash != unit.config_hash {
            "its config changed".into()
        } else {
            "an input's config changed".into()
        });
    }
    if let Some(o) = r.outputs.iter().find(|o| !layout.root.join(o).exists()) {
        return Some(format!("output {o} is missing"));
    }
    unit.inputs
        .iter()
        .find(|i| tokens.get(*i) != r.inputs.get(*i))
        .map(|i| format!("input {i} was redone"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::config::RecipeConfig;
    use crate::recipe::plan::plan;

    #[test]
    fn records_decide_what_is_up_to_date() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(d.path());
        let cfg = RecipeConfig::from_toml("tasks = [\"click-button\"]\n").unwrap();
        let units = plan(&cfg).unwrap();
        let none = BTreeMap::new();
        let u = &units[0];
        assert_eq!(
            stale_reason(&layout, u, &none).as_deref(),
            Some("not run yet")
        );
        std::fs::write(d.path().join("out.txt"), "x").unwrap();
        let r = Record::new(
            u,
            &none,
            vec!["out.txt".into()],
            1.5,
            serde_json::json!({"n": 1}),
        );
        write(&layout, &r).unwrap();
        assert_eq!(read(&layout, &u.id), Some(r.clone()));
        assert_eq!(stale_reason(&layout, u, &none), None);
        // A unit downstream is current only while its input's record is the one it read.
        let f = &units[1];
        assert_eq!(f.inputs, vec![u.id.clone()]);
        let tokens: BTreeMap<String, String> = [(u.id.clone(), r.token.clone())].into();
        write(
            &layout,
            &Record::new(f, &tokens, vec![], 0.1, serde_json::Value::Null),
        )
        .unwrap();
        assert_eq!(stale_reason(&layout, f, &tokens), None);
        let redone = Record::new(
            u,
            &none,
            vec!["out.txt".into()],
            1.5,
            serde_json::Value::Null,
        );
        assert_ne!(redone.token, r.token);
        let tokens: BTreeMap<String, String> = [(u.id.clone(), redone.token)].into();
        assert_eq!(
            stale_reason(&layout, f, &tokens).as_deref(),
            Some("input collect/reflection was redone")
        );
        std::fs::remove_file(d.path().join("out.txt")).unwrap();
        assert_eq!(
            stale_reason(&layout, u, &none).as_deref(),
            Some("output out.txt is missing")
        );
        let other =
            RecipeConfig::from_toml("tasks = [\"click-button\"]\n[collect]\nseeds = 3\n").unwrap();
        let changed = &plan(&other).unwrap()[0];
        assert_eq!(
            stale_reason(&layout, changed, &none).as_deref(),
            Some("its config changed")
        );
        remove(&layout, &u.id).unwrap();
        remove(&layout, &u.id).unwrap();
        assert_eq!(read(&layout, &u.id), None);
    }
}
