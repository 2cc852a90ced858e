//! THE prompt renderer of rmsweb: (task instruction, state, memory/history,
//! reflection) → chat messages (system + user, with the screenshot path for vision
//! models).
//!
//! Collection, SFT flattening, RL prompts and evaluation all call
//! [`super::render::render`] (this module's [`render_rmsweb`] or Browser Use's), so a
//! model is trained and tested on exactly the same observation text. Samples record
//! [`PROMPT_FORMAT_VERSION`] (or [`ECHO_FORMAT_VERSION`]); change it whenever the
//! rendered text changes.
//!
//! The element list is fitted to a token budget by [`super::element_select`], which
//! says how many elements were omitted instead of cutting the list's tail.

pub use super::element_select::{prompt_line, select_elements};
use crate::trajectory::{Element, State, Step};
use crate::util::sanitize::{clean_line, clean_text};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Version of the rendered prompt format; recorded by every sample built from it.
pub const PROMPT_FORMAT_VERSION: &str = "rmsweb-prompt/2";

/// The version of the [`super::format::PromptFormat::RmswebEcho`] layout: this
/// module's text with each element's index repeated after its text.
pub const ECHO_FORMAT_VERSION: &str = "rmsweb-echo/1";

/// Default total token budget of a prompt.
pub const DEFAULT_TOKEN_BUDGET: usize = 6000;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
    /// A PNG to attach as an image part (vision models only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<PathBuf>,
}

impl ChatMessage {
    /// A message without an image.
    pub fn new(role: &str, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            image: None,
        }
    }
}

pub use super::token_count::{CharApprox, TokenCounter};

/// Rendering options.
#[derive(Debug, Clone)]
pub struct PromptOptions {
    /// Total token budget for system + user text.
    pub token_budget: usize,
    /// Attach the screenshot (vision models).
    pub vision: bool,
    /// Most recent history steps shown.
    pub max_history: usize,
    /// Which prompt format [`super::render::render`] writes (this module's, or Browser Use's
    /// layout, [`super::browser_use`]).
    pub format: super::format::PromptFormat,
}

impl Default for PromptOptions {
    fn default() -> Self {
        PromptOptions {
            token_budget: DEFAULT_TOKEN_BUDGET,
            vision: false,
            max_history: 8,
            format: Default::default(),
        }
    }
}

/// What the prompt is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub instruction: &'a str,
    pub state: &'a State,
    /// Previous steps of this attempt, oldest first.
    pub history: &'a [Step],
    pub reflection: Option<&'a str>,
    /// Step budget of the episode.
    pub max_steps: usize,
    /// Absolute path of the current screenshot, for vision models.
    pub screenshot: Option<&'a std::path::Path>,
}

impl<'a> PromptInput<'a> {
    /// What a policy sees, as renderer input; `vision` keeps the screenshot.
    pub fn of(input: &super::PolicyInput<'a>, vision: bool) -> Self {
        PromptInput {
            instruction: &input.task.instruction,
            state: input.state,
            history: input.history,
            reflection: input.reflection,
            max_steps: input.max_steps,
            screenshot: input.screenshot.filter(|_| vision),
        }
    }
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPrompt {
    pub messages: Vec<ChatMessage>,
    /// [`PROMPT_FORMAT_VERSION`] at render time.
    pub format_version: &'static str,
    /// Element indices shown, in page order.
    pub shown: Vec<u32>,
    /// How many elements were left out to fit the budget.
    pub omitted: usize,
    /// Token count of all message texts.
    pub tokens: usize,
}

/// The system message: role, action vocabulary and the output contract.
pub fn system_prompt() -> String {
    system_prompt_for(false)
}

/// The system message of the plain layout, or (`echo`) of the layout whose element
/// lines end with their index again.
pub fn system_prompt_for(echo: bool) -> String {
    let plain = "You are a web agent operating a real browser to complete the user's task.\n\
     Each step you see the task, your previous steps, and the interactive elements of the \
     current page as lines `[index]<tag attr=value />text`. Refer to elements by index.\n\
     \n\
     Actions (use these names and parameters):\n\
     - click: {\"index\": int}\n\
     - input: {\"index\": int, \"text\": str, \"clear\": bool}\n\
     - select_dropdown: {\"index\": int, \"text\": str}\n\
     - send_keys: {\"keys\": str}  (e.g. \"Enter\", \"Control+a\")\n\
     - scroll: {\"down\": bool, \"pages\": float, \"index\": int (optional)}\n\
     - go_back: {}\n\
     - navigate: {\"url\": str}\n\
     - wait: {\"seconds\": float}\n\
     - done: {\"text\": str, \"success\": bool}\n\
     \n\
     Answer with one JSON object and nothing else:\n\
     {\"thinking\": str, \"evaluation_previous_goal\": str, \"memory\": str, \
     \"next_goal\": str, \"action\": [{\"<action name>\": {<params>}}]}\n\
     Give one to three actions; end with `done` once the task is complete.";
    if echo {
        plain.replace(
            "`[index]<tag attr=value />text`",
            "`[index]<tag attr=value />text [index]`",
        )
    } else {
        plain.to_string()
    }
}

fn history_text(history: &[Step], max: usize) -> String {
    let mut out = String::new();
    let skip = history.len().saturating_sub(max);
    if skip > 0 {
        out.push_str(&format!("({skip} earlier steps omitted)\n"));
    }
    for step in &history[skip..] {
        let o = &step.output;
        let actions: Vec<String> = o
            .actions
            .iter()
            .map(|a| clean_line(&a.short()).into_owned())
            .collect();
        let results: Vec<String> = step
            .result
            .iter()
            .map(|r| match &r.error {
                Some(e) => format!("error: {}", clean_line(e)),
                None if r.is_done => "done".into(),
                None => "ok".into(),
            })
            .collect();
        out.push_str(&format!("<step_{}>\n", step.index + 1));
        if !o.evaluation_previous_goal.is_empty() {
            out.push_str(&format!(
                "Evaluation of previous step: {}\n",
                clean_line(&o.evaluation_previous_goal)
            ));
        }
        if !o.memory.is_empty() {
            out.push_str(&format!("Memory: {}\n", clean_line(&o.memory)));
        }
        if !o.next_goal.is_empty() {
            out.push_str(&format!("Next goal: {}\n", clean_line(&o.next_goal)));
        }
        out.push_str(&format!(
            "Actions: {}\n",
            if actions.is_empty() {
                "(none)".into()
            } else {
                actions.join(", ")
            }
        ));
        out.push_str(&format!(
            "Results: {}\n",
            if results.is_empty() {
                "(none)".into()
            } else {
                results.join(", ")
            }
        ));
        out.push_str(&format!("</step_{}>\n", step.index + 1));
    }
    out
}

/// Indices of the `elements` whose lines a rendered user message shows (what
/// [`render_rmsweb`] returned as `shown`, recovered from the text alone: RL prompts are
/// stored SFT samples, rendered earlier), in either rmsweb layout.
pub fn shown_in(user: &str, elements: &[Element]) -> Vec<u32> {
    let lines: BTreeSet<&str> = user.lines().collect();
    elements
        .iter()
        .filter(|e| {
            lines.contains(prompt_line(e, false).as_str())
                || lines.contains(prompt_line(e, true).as_str())
        })
        .map(|e| e.index)
        .collect()
}

fn elements_block(elements: &[Element], shown: &[usize], echo: bool) -> String {
    let mut out = String::new();
    let mut next = 0;
    for &p in shown {
        if p > next {
            out.push_str(&format!("… {} elements omitted …\n", p - next));
        }
        out.push_str(&prompt_line(&elements[p], echo));
        out.push('\n');
        next = p + 1;
    }
    if elements.len() > next && !shown.is_empty() {
        out.push_str(&format!("… {} elements omitted …\n", elements.len() - next));
    }
    if elements.is_empty() {
        out.push_str("(no interactive elements)\n");
    } else if shown.is_empty() {
        out.push_str(&format!("… {} elements omitted …\n", elements.len()));
    }
    out
}

fn user_text(
    input: &PromptInput<'_>,
    history: &str,
    elements: &str,
    total: usize,
    shown: usize,
    page_text: &str,
) -> String {
    let state = input.state;
    let mut s = format!(
        "<task>\n{}\n</task>\n",
        clean_text(input.instruction).trim()
    );
    if let Some(r) = input.reflection.filter(|r| !r.trim().is_empty()) {
        s.push_str(&format!(
            "<reflection>\nA previous attempt at this task failed. Lessons from it:\n{}\n</reflection>\n",
            clean_text(r).trim()
        ));
    }
    if !history.is_empty() {
        s.push_str(&format!("<agent_history>\n{history}</agent_history>\n"));
    }
    let memory = input
        .history
        .last()
        .map(|st| st.output.memory.as_str())
        .filter(|m| !m.is_empty())
        .unwrap_or(state.memory.as_str());
    if !memory.is_empty() {
        s.push_str(&format!("<memory>\n{}\n</memory>\n", clean_line(memory)));
    }
    s.push_str(&format!(
        "<browser_state>\nStep {} of at most {}.\nURL: {}\nTitle: {}\n",
        input.history.len() + 1,
        input.max_steps,
        clean_line(&state.url),
        clean_line(&state.title),
    ));
    let tabs = super::observation::tab_lines(state);
    if !tabs.is_empty() {
        s.push_str(&format!("Tabs:\n{tabs}"));
    }
    if let Some(scroll) = super::observation::scroll_text(state) {
        s.push_str(&format!("Scroll: {scroll}\n"));
    }
    if !page_text.is_empty() {
        s.push_str(&format!("Page text:\n{page_text}\n"));
    }
    s.push_str(&format!(
        "Interactive elements ({shown} of {total} shown):\n{elements}</browser_state>\n"
    ));
    s
}

/// Renders the prompt in rmsweb's layout (or its echo variant, as `opts.format`
/// says) within `opts.token_budget` tokens as counted by `counter`; callers go
/// through [`super::render::render`], which also knows Browser Use's layout.
pub fn render_rmsweb(
    input: &PromptInput<'_>,
    opts: &PromptOptions,
    counter: &dyn TokenCounter,
) -> RenderedPrompt {
    let echo = opts.format == super::format::PromptFormat::RmswebEcho;
    let system = system_prompt_for(echo);
    let elements = &input.state.elements;
    let mut max_history = opts.max_history;
    let mut history = history_text(input.history, max_history);
    // Page text outside the elements takes at most a quarter of what the element
    // list could have, the lines the task is about first.
    let page_text = {
        let bare =
            counter.count(&system) + counter.count(&user_text(input, &history, "", 0, 0, ""));
        let room = opts.token_budget.saturating_sub(bare) as f64;
        super::observation::fit_page_text(
            &input.state.page_text,
            input.instruction,
            (room * super::observation::PAGE_TEXT_SHARE) as usize,
            counter,
        )
    };
    // The fixed part: everything but the element lines.
    let fixed = |h: &str| {
        counter.count(&system)
            + counter.count(&user_text(
                input,
                h,
                "",
                elements.len(),
                elements.len(),
                &page_text,
            ))
    };
    while fixed(&history) > opts.token_budget / 2 && max_history > 1 {
        max_history /= 2;
        history = history_text(input.history, max_history);
    }
    let element_budget = opts.token_budget.saturating_sub(fixed(&history));
    let shown = select_elements(
        elements,
        input.instruction,
        input.history,
        element_budget,
        counter,
        echo,
    );
    let block = elements_block(elements, &shown, echo);
    let user = user_text(
        input,
        &history,
        &block,
        elements.len(),
        shown.len(),
        &page_text,
    );
    let tokens = counter.count(&system) + counter.count(&user);
    let mut user_msg = ChatMessage::new("user", user);
    if opts.vision {
        user_msg.image = input.screenshot.map(|p| p.to_path_buf());
    }
    RenderedPrompt {
        messages: vec![ChatMessage::new("system", system), user_msg],
        format_version: if echo {
            ECHO_FORMAT_VERSION
        } else {
            PROMPT_FORMAT_VERSION
        },
        omitted: elements.len() - shown.len(),
        shown: shown.iter().map(|&p| elements[p].index).collect(),
        tokens,
    }
}

#[cfg(test)]
mod tests;
