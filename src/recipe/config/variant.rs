//! An RL variant of the recipe: a mode and a prompt source, and its names.

use crate::train::rl::config::PromptSource;
use crate::train::rl::groups::Mode;
use crate::util::sanitize::excerpt;
use anyhow::{Result, bail};
use serde::Serialize;

/// The variants the issue asks for.
pub const DEFAULT_VARIANTS: [&str; 5] = [
    "salvage-ds",
    "dapo",
    "anchor-free",
    "grpo",
    "salvage-ds+full-corpus",
];

/// One RL variant: a mode on a prompt source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub mode: Mode,
    pub prompts: PromptSource,
}

/// The `--mode` / `--prompts` word of a mode or source.
fn kebab<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Variant {
    /// Parses `salvage-ds` or `dapo+full-corpus`.
    pub fn parse(s: &str) -> Result<Variant> {
        let shown = excerpt(s);
        let (mode, prompts) = match s.split_once('+') {
            Some((m, "full-corpus")) => (m, PromptSource::FullCorpus),
            Some((_, other)) => {
                bail!(
                    "variant `{shown}`: unknown prompt source `{}` (full-corpus)",
                    excerpt(other)
                )
            }
            None => (s, PromptSource::Mined),
        };
        let mode = Mode::from_name(mode).ok_or_else(|| {
            anyhow::anyhow!("variant `{shown}`: unknown mode ({})", Mode::names(", "))
        })?;
        Ok(Variant { mode, prompts })
    }

    /// The `rmsweb train rl --mode` word.
    pub fn mode_arg(&self) -> String {
        self.mode.name().to_string()
    }

    /// The `rmsweb train rl --prompts` word.
    pub fn prompts_arg(&self) -> String {
        kebab(&self.prompts)
    }

    /// The canonical name (`salvage-ds`, `salvage-ds+full-corpus`).
    pub fn name(&self) -> String {
        match self.prompts {
            PromptSource::Mined => self.mode_arg(),
            PromptSource::FullCorpus => format!("{}+full-corpus", self.mode_arg()),
        }
    }
}
