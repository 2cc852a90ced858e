//! The one entry point that renders a prompt (and names its system message) in the
//! format its options name: rmsweb's layouts ([`super::prompt`]) or Browser Use's
//! ([`super::browser_use`]).

use super::format::PromptFormat;
use super::prompt::{PromptInput, PromptOptions, RenderedPrompt, TokenCounter};

/// The system message a model trained in `format` was given.
pub fn system_prompt(format: PromptFormat) -> String {
    match format {
        PromptFormat::BrowserUse => super::browser_use::system_prompt(),
        PromptFormat::Rmsweb => super::prompt::system_prompt_for(false),
        PromptFormat::RmswebEcho => super::prompt::system_prompt_for(true),
    }
}

/// Renders the prompt within `opts.token_budget` tokens as counted by `counter`, in
/// the layout `opts.format` names.
pub fn render(
    input: &PromptInput<'_>,
    opts: &PromptOptions,
    counter: &dyn TokenCounter,
) -> RenderedPrompt {
    match opts.format {
        PromptFormat::BrowserUse => super::browser_use::render(input, opts, counter),
        PromptFormat::Rmsweb | PromptFormat::RmswebEcho => {
            super::prompt::render_rmsweb(input, opts, counter)
        }
    }
}
