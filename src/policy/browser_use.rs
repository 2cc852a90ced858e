//! The `browser-use` prompt format: Browser Use 0.13's message layout, so that a
//! model trained on it sees at deployment, inside Browser Use, the observation it
//! was trained on.
//!
//! The user message has Browser Use's sections in its order — `<user_request>`,
//! `<agent_history>` (one `<step>` per earlier step: evaluation, memory, next goal,
//! then `Result` and what each action returned), `<agent_state>`, `<browser_state>`
//! (page statistics, current tab, the tab list, `<page_info>` with the scroll
//! position, then the interactive elements as `[N]<tag attr=value />` lines with
//! their text on tab-indented lines below, and the page text), `<read_state>` (what
//! the previous step's `extract` returned) and `<step_info>`. The layout was learnt
//! from Browser Use's own histories (`tests/data/browser_use/`); the text is
//! rmsweb's, including the system prompt ([`system_prompt`]), which describes the
//! same contract in its own words.
//!
//! A state imported from a Browser Use history keeps the message the teacher saw
//! (`state.state_message`): it is used verbatim when it fits the token budget,
//! else the state is rendered and trimmed like any other. Rendered messages are
//! fitted to the budget as [`super::prompt`] does: history halved first, then the
//! element list trimmed around what matters (task words, the last acted-on
//! element), page text held to a quarter of the room, the task's lines first.

use super::observation::{PAGE_TEXT_SHARE, fit_page_text, scroll_text};
use super::prompt::{
    ChatMessage, PromptInput, PromptOptions, RenderedPrompt, TokenCounter, select_elements,
};
use crate::trajectory::{Element, State, Step};
use crate::util::sanitize::{clean_line, clean_text};
use serde_json::Value;

/// Version of this format; recorded by every sample built from it.
pub const FORMAT_VERSION: &str = "browser-use-0.13/1";

/// Actions a step may hold at most (Browser Use's `max_actions_per_step` shown).
pub const MAX_ACTIONS: usize = 3;

/// The system message of the format (rmsweb's own wording of Browser Use's
/// contract: the loop, the input sections, the actions, the JSON answer).
// Kept whole: it is one message's text, and reads best as the model reads it, top to bottom.
pub fn system_prompt() -> String {
    format!(
        "You are a browser agent. You work in steps until the task in <user_request> is done.\n\
         Each step you are shown:\n\
         - <agent_history>: your earlier steps, each with its evaluation, memory, next goal and what its actions returned.\n\
         - <agent_state>: your files and todo list.\n\
         - <browser_state>: the open tabs, the scroll position, and the page: interactive elements as \
         `[index]<tag attributes />` with their text on the indented lines below, then other page text. \
         Only elements with an [index] can be used; `*[` marks elements new since the last step.\n\
         - <read_state>: content returned by your last extract or file read, shown once.\n\
         - <step_info>: the step number and the step limit.\n\
         \n\
         Actions (name: parameters):\n\
         - navigate: url, new_tab · search: query · go_back · wait: seconds\n\
         - click: index · input: index, text, clear · select_dropdown: index, text · dropdown_options: index\n\
         - scroll: down, pages, index (optional) · find_text: text · send_keys: keys · upload_file: index, path\n\
         - switch: tab_id · close: tab_id (the 4-character ids of the tab list)\n\
         - extract: query · search_page: pattern · find_elements: selector · evaluate: code\n\
         - write_file: file_name, content · replace_file: file_name, old_str, new_str · read_file: file_name\n\
         - done: text, success — the final answer; success is false when the task could not be completed.\n\
         \n\
         Use at most {MAX_ACTIONS} actions per step, and check in the next step that they did what you meant. \
         Report only what you saw on the page.\n\
         Answer with one JSON object and nothing else:\n\
         {{\"thinking\": \"...\", \"evaluation_previous_goal\": \"...\", \"memory\": \"...\", \
         \"next_goal\": \"...\", \"action\": [{{\"click\": {{\"index\": 3}}}}]}}"
    )
}

/// Renders the prompt in Browser Use's layout within `opts.token_budget` tokens.
pub fn render(
    input: &PromptInput<'_>,
    opts: &PromptOptions,
    counter: &dyn TokenCounter,
) -> RenderedPrompt {
    let system = system_prompt();
    let sys_tokens = counter.count(&system);
    let elements = &input.state.elements;
    let image = input
        .screenshot
        .filter(|_| opts.vision)
        .map(|p| p.to_path_buf());
    let finish = |user: String, shown: Vec<u32>, omitted: usize| {
        let tokens = sys_tokens + counter.count(&user);
        let mut user_msg = ChatMessage::new("user", user);
        user_msg.image = image.clone();
        RenderedPrompt {
            messages: vec![ChatMessage::new("system", system.clone()), user_msg],
            format_version: FORMAT_VERSION,
            shown,
            omitted,
            tokens,
        }
    };
    if let Some(verbatim) = &input.state.state_message
        && sys_tokens + counter.count(verbatim) <= opts.token_budget
    {
        return finish(
            verbatim.clone(),
            elements.iter().map(|e| e.index).collect(),
            0,
        );
    }
    let mut max_history = opts.max_history;
    let mut history = history_text(input.history, max_history);
    let bare = |h: &str| sys_tokens + counter.count(&user_message(input, h, "", ""));
    while bare(&history) > opts.token_budget / 2 && max_history > 1 {
        max_history /= 2;
        history = history_text(input.history, max_history);
    }
    let room = opts.token_budget.saturating_sub(bare(&history));
    let page_text = fit_page_text(
        &input.state.page_text,
        input.instruction,
        (room as f64 * PAGE_TEXT_SHARE) as usize,
        counter,
    );
    let fixed = sys_tokens + counter.count(&user_message(input, &history, "", &page_text));
    let shown = select_elements(
        elements,
        input.instruction,
        input.history,
        opts.token_budget.saturating_sub(fixed),
        counter,
        false,
    );
    let block = element_block(elements, &shown);
    let user = user_message(input, &history, &block, &page_text);
    finish(
        user,
        shown.iter().map(|&p| elements[p].index).collect(),
        elements.len() - shown.len(),
    )
}

/// The user message from its rendered pieces (history items, element lines, page
/// text).
fn user_message(input: &PromptInput<'_>, history: &str, elements: &str, page_text: &str) -> String {
    {
        let state = input.state;
        let mut s = format!(
            "<user_request>\n{}\n</user_request>\n\n",
            clean_text(input.instruction).trim()
        );
        if let Some(r) = input.reflection.filter(|r| !r.trim().is_empty()) {
            s.push_str(&format!(
                "<reflection>\nA previous attempt at this task failed. Lessons from it:\n{}\n</reflection>\n\n",
                clean_text(r).trim()
            ));
        }
        s.push_str(&format!(
            "<agent_history>\nAgent initialized\n{}</agent_history>\n\n",
            history
        ));
        s.push_str(
            "<agent_state>\n<file_system>\n\n</file_system>\n<todo_contents>\n\
             [empty todo.md, fill it when applicable]\n</todo_contents>\n</agent_state>\n",
        );
        s.push_str(&format!("<browser_state>\n{}", browser_state_head(state)));
        s.push_str("Interactive elements:\n");
        if state.elements.is_empty() && page_text.is_empty() {
            s.push_str("empty page\n");
        } else {
            let above = state.scroll.is_some_and(|p| p.pages_above > 0.0);
            let below = state.scroll.is_some_and(|p| p.pages_below > 0.0);
            if !above {
                s.push_str("[Start of page]\n");
            }
            s.push_str(elements);
            if !page_text.is_empty() {
                s.push_str(page_text);
                s.push('\n');
            }
            if !below {
                s.push_str("[End of page]\n");
            }
        }
        s.push_str("</browser_state>\n");
        let read = read_state(input.history);
        if !read.is_empty() {
            s.push_str(&format!("<read_state>\n{read}\n</read_state>\n"));
        }
        let step = input.history.iter().filter(|h| h.is_model_step()).count() + 1;
        s.push_str(&format!(
            "<step_info>Step{step} maximum:{}</step_info>\n",
            input.max_steps
        ));
        s
    }
}

/// Page statistics, the current tab, the tab list and the scroll position.
fn browser_state_head(state: &State) -> String {
    let links = state.elements.iter().filter(|e| e.tag == "a").count();
    let mut s = format!(
        "<page_stats>{links} links, {} interactive</page_stats>\n",
        state.elements.len()
    );
    if !state.current_tab.is_empty() {
        s.push_str(&format!(
            "Current tab: {}\n",
            clean_line(&state.current_tab)
        ));
    }
    s.push_str("Available tabs:\n");
    for t in &state.tabs {
        let title: String = clean_line(&t.title).chars().take(30).collect();
        s.push_str(&format!(
            "Tab {}: {} - {title}\n",
            clean_line(&t.id),
            clean_line(&t.url)
        ));
    }
    if state.tabs.is_empty() {
        s.push_str(&format!(
            "Tab 0000: {} - {}\n",
            clean_line(&state.url),
            clean_line(&state.title)
                .chars()
                .take(30)
                .collect::<String>()
        ));
    }
    s.push('\n');
    if let Some(scroll) = scroll_text(state) {
        s.push_str(&format!("<page_info>{scroll}</page_info>\n\n"));
    }
    s
}

/// An element as Browser Use lists it: `[N]<tag attr=value />`, its text on the
/// tab-indented line below.
pub fn element_lines(e: &Element) -> String {
    let mut s = format!("[{}]<{}", e.index, clean_line(&e.tag));
    for (k, v) in &e.attrs {
        let v: String = clean_line(v).chars().take(80).collect();
        s.push_str(&format!(" {}={v}", clean_line(k)));
    }
    s.push_str(" />\n");
    let text = clean_line(&e.text);
    if !text.trim().is_empty() {
        s.push_str(&format!("\t{}\n", text.trim()));
    }
    s
}

fn element_block(elements: &[Element], shown: &[usize]) -> String {
    let mut out = String::new();
    let mut next = 0;
    for &p in shown {
        if p > next {
            out.push_str(&format!("… {} elements omitted …\n", p - next));
        }
        out.push_str(&element_lines(&elements[p]));
        next = p + 1;
    }
    if elements.len() > next {
        out.push_str(&format!("… {} elements omitted …\n", elements.len() - next));
    }
    out
}

/// What one earlier step looks like in `<agent_history>`.
fn history_item(step: &Step) -> String {
    let o = &step.output;
    let mut s = String::from("<step>\n");
    if o.actions.is_empty() && o.next_goal.is_empty() && step.is_model_step() {
        s.push_str("Agent failed to output in the right format.\n");
        return s;
    }
    for part in [&o.evaluation_previous_goal, &o.memory, &o.next_goal] {
        if !part.trim().is_empty() {
            s.push_str(&clean_text(part.trim()));
            s.push('\n');
        }
    }
    let results: Vec<String> = step
        .result
        .iter()
        .enumerate()
        .filter_map(|(j, r)| {
            let memory = step
                .extra
                .get("result")
                .and_then(|l| l.get(j))
                .and_then(|x| x.get("long_term_memory"))
                .and_then(Value::as_str);
            let text = match (&r.error, memory, &r.extracted_content) {
                (Some(e), _, _) => format!("Error: {}", e.trim()),
                (None, Some(m), _) => m.trim().to_string(),
                (None, None, Some(c)) => c.trim().to_string(),
                (None, None, None) => return None,
            };
            Some(clean_text(&text).into_owned())
        })
        .collect();
    if !results.is_empty() {
        s.push_str("Result\n");
        s.push_str(&results.join("\n"));
        s.push('\n');
    }
    s
}

fn history_text(history: &[Step], max: usize) -> String {
    let skip = history.len().saturating_sub(max);
    let mut out = String::new();
    if skip > 0 {
        out.push_str(&format!("<sys>{skip} earlier steps omitted</sys>\n"));
    }
    for step in &history[skip..] {
        out.push_str(&history_item(step));
    }
    out
}

/// What the previous step's `extract` actions returned, shown once.
fn read_state(history: &[Step]) -> String {
    let Some(last) = history.last() else {
        return String::new();
    };
    last.output
        .actions
        .iter()
        .zip(&last.result)
        .filter(|(a, r)| a.name == "extract" && r.error.is_none())
        .filter_map(|(_, r)| r.extracted_content.as_deref())
        .map(|c| clean_text(c.trim()).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::policy::prompt::CharApprox;
    use crate::trajectory::{ActionResult, ModelOutput, Scroll, Tab};
    use serde_json::json;

    fn state() -> State {
        State {
            url: "http://a.test/parts".into(),
            title: "Parts".into(),
            tabs: vec![Tab {
                id: "5BA7".into(),
                url: "http://a.test/parts".into(),
                title: "Parts".into(),
            }],
            current_tab: "5BA7".into(),
            scroll: Some(Scroll {
                pages_above: 0.0,
                pages_below: 0.0,
            }),
            elements: vec![Element {
                index: 3,
                tag: "a".into(),
                text: "Back to the shop".into(),
                attrs: [("href".to_string(), "/".to_string())].into(),
                ..Default::default()
            }],
            page_text: "Parts catalogue\nW-132 is red.".into(),
            ..Default::default()
        }
    }

    fn input<'a>(st: &'a State, hist: &'a [Step]) -> PromptInput<'a> {
        PromptInput {
            instruction: "Find the colour of W-132.",
            state: st,
            history: hist,
            reflection: None,
            max_steps: 8,
            screenshot: None,
        }
    }

    #[test]
    fn renders_browser_uses_sections_in_order() {
        let st = state();
        let hist = vec![Step {
            output: ModelOutput {
                evaluation_previous_goal: "Start.".into(),
                memory: "On the catalogue.".into(),
                next_goal: "Extract the colour.".into(),
                actions: vec![Action::new("extract", json!({"query": "colour of W-132"}))],
                ..Default::default()
            },
            result: vec![ActionResult {
                extracted_content: Some("W-132 is red".into()),
                ..Default::default()
            }],
            ..Default::default()
        }];
        let r = render(&input(&st, &hist), &PromptOptions::default(), &CharApprox);
        assert_eq!(r.format_version, FORMAT_VERSION);
        let user = &r.messages[1].content;
        let order = [
            "<user_request>\nFind the colour of W-132.\n</user_request>",
            "<agent_history>\nAgent initialized\n<step>\nStart.\nOn the catalogue.\nExtract the colour.\nResult\nW-132 is red\n</agent_history>",
            "<agent_state>",
            "<browser_state>",
            "Current tab: 5BA7\nAvailable tabs:\nTab 5BA7: http://a.test/parts - Parts",
            "<page_info>0.0 pages above, 0.0 pages below</page_info>",
            "Interactive elements:\n[Start of page]\n[3]<a href=/ />\n\tBack to the shop\nParts catalogue\nW-132 is red.\n[End of page]",
            "<read_state>\nW-132 is red\n</read_state>",
            "<step_info>Step2 maximum:8</step_info>",
        ];
        let mut at = 0;
        for part in order {
            let found = user[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} missing after byte {at} in\n{user}"));
            at += found + part.len();
        }
        assert!(r.messages[0].content.contains("\"next_goal\""));
    }

    #[test]
    fn a_recorded_state_message_is_used_verbatim_when_it_fits() {
        let mut st = state();
        st.state_message = Some("<user_request>\nX\n</user_request>\n<browser_state>...".into());
        let r = render(&input(&st, &[]), &PromptOptions::default(), &CharApprox);
        assert_eq!(r.messages[1].content, st.state_message.clone().unwrap());
        let tight = PromptOptions {
            token_budget: 10,
            ..Default::default()
        };
        st.state_message = Some("x".repeat(10_000));
        let r = render(&input(&st, &[]), &tight, &CharApprox);
        assert!(r.messages[1].content.starts_with("<user_request>"));
    }

    #[test]
    fn a_long_page_is_trimmed_to_the_budget_keeping_the_task_line() {
        let mut st = state();
        st.elements = (1..=300)
            .map(|i| Element {
                index: i,
                tag: "button".into(),
                text: format!("filler button number {i}"),
                ..Default::default()
            })
            .collect();
        st.page_text = (0..300)
            .map(|i| format!("line {i} of the newsletter"))
            .chain(["W-132 is red.".to_string()])
            .collect::<Vec<_>>()
            .join("\n");
        let opts = PromptOptions {
            token_budget: 2000,
            ..Default::default()
        };
        let r = render(&input(&st, &[]), &opts, &CharApprox);
        assert!(r.tokens <= 2000, "{} tokens", r.tokens);
        assert!(r.omitted > 0);
        let user = &r.messages[1].content;
        assert!(user.contains("W-132 is red.") && user.contains("elements omitted"));
    }
}
