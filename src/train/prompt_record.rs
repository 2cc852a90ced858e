//! The prompt layout a checkpoint was trained on, written beside its weights
//! (`prompt_format.json`, the samples' version string such as `rmsweb-echo/1`), so
//! `eval` and `collect` render the layout the model knows without being told.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record's file name, in a checkpoint folder or a merged model folder.
pub const FILE: &str = "prompt_format.json";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    prompt_format: String,
}

/// Writes the record of `version` into the folder `dir`.
pub fn write(dir: &Path, version: &str) -> Result<()> {
    let text = serde_json::to_string_pretty(&Record {
        prompt_format: version.to_string(),
    })?;
    crate::util::fs::write_atomic(&dir.join(FILE), text.as_bytes())
}

/// Where the record of a model folder, run checkpoint, run folder (its latest
/// checkpoint) or adapter folder is, if it has one.
pub fn find(model: &Path) -> Result<Option<PathBuf>> {
    let ckpt = super::run::resolve_checkpoint(model)?;
    let mut candidates = vec![ckpt.join(FILE)];
    if ckpt.file_name().is_some_and(|n| n == "adapter")
        && let Some(parent) = ckpt.parent()
    {
        candidates.push(parent.join(FILE));
    }
    Ok(candidates.into_iter().find(|p| p.is_file()))
}

/// The version string recorded for `model` ([`find`]), `None` where nothing is
/// recorded (an imported base, a checkpoint older than the record). A record that
/// cannot be read is an error naming the file and the field.
pub fn read(model: &Path) -> Result<Option<String>> {
    let Some(path) = find(model)? else {
        return Ok(None);
    };
    let shown = crate::util::sanitize::clean_line(&path.display().to_string()).into_owned();
    let text = crate::util::fs::read_text_limited(&path, 1 << 16)
        .with_context(|| format!("reading {shown}"))?;
    let r: Record = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{shown}: line {}: expected {{\"prompt_format\": \"<layout>/<version>\"}}: {}",
            e.line(),
            crate::util::sanitize::clean_line(&e.to_string())
        )
    })?;
    anyhow::ensure!(
        !r.prompt_format.trim().is_empty(),
        "{shown}: field prompt_format is empty"
    );
    Ok(Some(r.prompt_format))
}

/// Copies the record of `from` ([`find`]) into the folder `to`; whether there was one.
pub fn copy(from: &Path, to: &Path) -> Result<bool> {
    match read(from)? {
        Some(v) => write(to, &v).map(|()| true),
        None => Ok(false),
    }
}

/// The one layout version every sample records, `None` when they record several
/// (a mixed corpus) or there are none.
pub fn of_samples(samples: &[crate::curate::flatten::Sample]) -> Option<String> {
    let mut versions: std::collections::BTreeSet<&str> =
        samples.iter().map(|s| s.prompt_format.as_str()).collect();
    match versions.len() {
        1 => versions.pop_first().map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_found_from_the_run_the_checkpoint_or_its_adapter() {
        let d = tempfile::tempdir().unwrap();
        let ckpt = d.path().join("checkpoints/step-4");
        std::fs::create_dir_all(ckpt.join("adapter")).unwrap();
        std::fs::write(ckpt.join("trainable.safetensors"), b"").unwrap();
        std::fs::write(ckpt.join("adapter/adapter_config.json"), b"{}").unwrap();
        std::fs::write(ckpt.join("adapter/adapter_model.safetensors"), b"").unwrap();
        assert_eq!(read(&ckpt).unwrap(), None);
        write(&ckpt, "rmsweb-echo/1").unwrap();
        for p in [ckpt.clone(), ckpt.join("adapter")] {
            assert_eq!(read(&p).unwrap().as_deref(), Some("rmsweb-echo/1"), "{p:?}");
        }
        let out = d.path().join("merged");
        std::fs::create_dir_all(&out).unwrap();
        assert!(copy(&ckpt, &out).unwrap());
        assert_eq!(read(&out).unwrap().as_deref(), Some("rmsweb-echo/1"));
    }

    #[test]
    fn a_damaged_record_names_its_file_and_field() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), "{\"prompt_fromat\": \"x\x1b[2J\"}").unwrap();
        let e = format!("{:#}", read(d.path()).unwrap_err());
        assert!(e.contains(FILE) && e.contains("prompt_format"), "{e}");
        assert!(!e.contains('\x1b'), "{e:?}");
        std::fs::write(d.path().join(FILE), "{\"prompt_format\": \" \"}").unwrap();
        let e = format!("{:#}", read(d.path()).unwrap_err());
        assert!(e.contains("prompt_format is empty"), "{e}");
    }
}
