//! The prompt formats a model can be trained and run with.

use serde::{Deserialize, Serialize};

/// Which message layout [`super::render::render`] writes. Samples record the
/// format's version string, so a model is evaluated and served with the format it
/// was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PromptFormat {
    /// rmsweb's own compact layout ([`super::prompt`], `rmsweb-prompt/N`).
    #[default]
    Rmsweb,
    /// rmsweb's layout with every element's index repeated after its text
    /// (`[5]<button />OK [5]`, `rmsweb-echo/N`). A model that has just written an
    /// element's text in its thinking finds the index right after that text in the
    /// page, instead of at the start of the line: the grounding a 135M model
    /// misses in the plain layout (docs/pretrained-models.md).
    RmswebEcho,
    /// Browser Use 0.13's layout ([`super::browser_use`], `browser-use-0.13/N`): a
    /// model trained with it runs inside Browser Use unchanged.
    BrowserUse,
}

impl PromptFormat {
    /// The name `--prompt-format` and recipe files take.
    pub fn name(self) -> &'static str {
        match self {
            PromptFormat::Rmsweb => "rmsweb",
            PromptFormat::RmswebEcho => "rmsweb-echo",
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
        } else if version.starts_with("rmsweb-echo") {
            Some(PromptFormat::RmswebEcho)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn names_are_the_ones_clap_and_serde_take() {
        for f in PromptFormat::value_variants() {
            assert_eq!(f.to_possible_value().unwrap().get_name(), f.name());
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
    }
}
