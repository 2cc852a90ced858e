//! `tasks generate`'s answer cache: one JSON file per (query, model, prompt
//! version) under `<dataset>/cache/tasks-generate/`, named by the SHA-256 of the
//! three; the file repeats them, so a hash collision is read as a miss.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where answers are kept.
pub struct AnswerCache {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    query: String,
    model: String,
    prompt_version: String,
    answer: String,
}

impl AnswerCache {
    /// The cache of `dataset`.
    pub fn new(dataset: &Path) -> AnswerCache {
        AnswerCache {
            dir: dataset.join("cache").join("tasks-generate"),
        }
    }

    fn path(&self, query: &str, model: &str, version: &str) -> PathBuf {
        let mut h = Sha256::new();
        for part in [query, model, version] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.json"))
    }

    /// The cached answer, if any (an unreadable entry counts as none).
    pub fn get(&self, query: &str, model: &str, version: &str) -> Option<String> {
        let text = crate::util::fs::read_record(&self.path(query, model, version)).ok()?;
        let e: Entry = serde_json::from_str(&text).ok()?;
        (e.query == query && e.model == model && e.prompt_version == version).then_some(e.answer)
    }

    /// Keeps an answer.
    pub fn put(&self, query: &str, model: &str, version: &str, answer: &str) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let e = Entry {
            query: query.into(),
            model: model.into(),
            prompt_version: version.into(),
            answer: answer.into(),
        };
        crate::util::fs::write_atomic(&self.path(query, model, version), &serde_json::to_vec(&e)?)
    }
}
