//! The prompt formats a model can be trained and run with.

use serde::{Deserialize, Serialize};

/// Which message layout [`super::prompt::render`] writes. Samples record the
/// format's version string, so a model is evaluated and served with the format it
/// was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PromptFormat {
    /// rmsweb's own compact layout ([`super::prompt`], `rmsweb-prompt/N`).
    #[default]
    Rmsweb,
    /// Browser Use 0.13's layout ([`super::browser_use`], `browser-use-0.13/N`): a
    /// model trained with it runs inside Browser Use unchanged.
    BrowserUse,
}

impl PromptFormat {
    /// The format's name as written on the command line and in configs.
    pub fn name(self) -> &'static str {
        match self {
            PromptFormat::Rmsweb => "rmsweb",
            PromptFormat::BrowserUse => "browser-use",
        }
    }

    /// The format of a sample's recorded version string (`rmsweb-prompt/2`,
    /// `browser-use-0.13/1`), if it names one of the formats.
    pub fn of_version(version: &str) -> Option<Self> {
        if version.starts_with("browser-use") {
            Some(PromptFormat::BrowserUse)
        } else if version.starts_with("rmsweb-prompt") {
            Some(PromptFormat::Rmsweb)
        } else {
            None
        }
    }

    /// Parses a name (`rmsweb`, `browser-use`).
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        match name {
            "rmsweb" => Ok(PromptFormat::Rmsweb),
            "browser-use" => Ok(PromptFormat::BrowserUse),
            other => anyhow::bail!("unknown prompt format `{other}` (rmsweb, browser-use)"),
        }
    }
}
