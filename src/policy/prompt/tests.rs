use super::*;
use crate::action::Action;
use crate::trajectory::ModelOutput;
use serde_json::json;

fn el(index: u32, text: &str) -> Element {
    Element {
        index,
        tag: "button".into(),
        role: "button".into(),
        text: text.into(),
        ..Default::default()
    }
}

fn state(n: u32, special: &[(u32, &str)]) -> State {
    let elements = (1..=n)
        .map(|i| {
            let t = special
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, t)| t.to_string())
                .unwrap_or_else(|| format!("filler item number {i} lorem ipsum"));
            el(i, &t)
        })
        .collect();
    State {
        url: "http://127.0.0.1/x".into(),
        title: "T".into(),
        elements,
        ..Default::default()
    }
}

fn step_clicking(index: u32) -> Step {
    Step {
        index: 0,
        state: State::default(),
        output: ModelOutput {
            memory: "clicked once".into(),
            actions: vec![Action::new("click", json!({"index": index}))],
            ..Default::default()
        },
        result: vec![Default::default()],
        timing: None,
        ..Default::default()
    }
}

fn input<'a>(
    instr: &'a str,
    st: &'a State,
    hist: &'a [Step],
    refl: Option<&'a str>,
) -> PromptInput<'a> {
    PromptInput {
        instruction: instr,
        state: st,
        history: hist,
        reflection: refl,
        max_steps: 10,
        screenshot: None,
    }
}

#[test]
fn everything_fits_in_a_large_budget() {
    let st = state(20, &[]);
    let r = render_rmsweb(
        &input("Click on the \"OK\" button.", &st, &[], None),
        &PromptOptions::default(),
        &CharApprox,
    );
    assert_eq!(r.omitted, 0);
    assert_eq!(r.shown.len(), 20);
    assert!(
        r.messages[1]
            .content
            .contains("[20]<button />filler item number 20")
    );
    assert_eq!(r.format_version, PROMPT_FORMAT_VERSION);
    assert!(r.tokens <= DEFAULT_TOKEN_BUDGET);
}

#[test]
fn trimming_keeps_relevant_and_nearby_elements_and_says_what_was_omitted() {
    let st = state(400, &[(350, "Checkout basket"), (10, "home")]);
    let hist = vec![step_clicking(200)];
    let opts = PromptOptions {
        token_budget: 1500,
        ..Default::default()
    };
    let r = render_rmsweb(
        &input("Open the checkout basket", &st, &hist, None),
        &opts,
        &CharApprox,
    );
    assert!(r.omitted > 0);
    assert!(r.tokens <= opts.token_budget, "{} tokens", r.tokens);
    // The element whose text matches the task survives even far from the anchor.
    assert!(r.shown.contains(&350));
    // Elements around the previously clicked one survive, the far ends do not.
    for i in 195..=205 {
        assert!(r.shown.contains(&i), "missing {i}");
    }
    assert!(!r.shown.contains(&1) && !r.shown.contains(&400));
    let user = &r.messages[1].content;
    assert!(user.contains("elements omitted"));
    assert!(user.contains(&format!("({} of 400 shown)", r.shown.len())));
    // The list is not merely cut at its end: it resumes after the gap.
    assert!(user.contains("[350]<button />Checkout basket"));
    // What was shown can be recovered from the text alone (RL prompts).
    assert_eq!(shown_in(user, &st.elements), r.shown);
}

#[test]
fn without_history_the_top_of_the_page_is_kept() {
    let st = state(300, &[]);
    let opts = PromptOptions {
        token_budget: 1200,
        ..Default::default()
    };
    let r = render_rmsweb(&input("do something", &st, &[], None), &opts, &CharApprox);
    assert!(r.shown.contains(&1) && !r.shown.contains(&300));
}

#[test]
fn reflection_history_and_memory_are_rendered() {
    let st = state(3, &[]);
    let hist = vec![step_clicking(2)];
    let r = render_rmsweb(
        &input(
            "Click on the \"OK\" button.",
            &st,
            &hist,
            Some("Do not click Cancel."),
        ),
        &PromptOptions::default(),
        &CharApprox,
    );
    let user = &r.messages[1].content;
    assert!(user.contains("<reflection>") && user.contains("Do not click Cancel."));
    assert!(user.contains("Actions: click(2)"));
    assert!(user.contains("<memory>\nclicked once"));
    assert!(user.contains("Step 2 of at most 10."));
    assert_eq!(r.messages[0].role, "system");
    assert!(r.messages[0].content.contains("\"action\""));
}

#[test]
fn vision_attaches_the_screenshot_only_when_asked() {
    let st = state(2, &[]);
    let mut inp = input("x", &st, &[], None);
    let p = std::path::PathBuf::from("/tmp/shot.png");
    inp.screenshot = Some(&p);
    let plain = render_rmsweb(&inp, &PromptOptions::default(), &CharApprox);
    assert!(plain.messages[1].image.is_none());
    let vis = render_rmsweb(
        &inp,
        &PromptOptions {
            vision: true,
            ..Default::default()
        },
        &CharApprox,
    );
    assert_eq!(vis.messages[1].image.as_deref(), Some(p.as_path()));
}

#[test]
fn a_custom_tokenizer_changes_the_budget_accounting() {
    struct PerChar;
    impl TokenCounter for PerChar {
        fn count(&self, t: &str) -> usize {
            t.chars().count()
        }
    }
    let st = state(100, &[]);
    let opts = PromptOptions {
        token_budget: 4000,
        ..Default::default()
    };
    let approx = render_rmsweb(&input("x", &st, &[], None), &opts, &CharApprox);
    let strict = render_rmsweb(&input("x", &st, &[], None), &opts, &PerChar);
    assert!(strict.shown.len() < approx.shown.len());
}

#[test]
fn the_echo_layout_repeats_each_index_after_its_text_within_the_budget() {
    let st = state(200, &[(150, "OK")]);
    let opts = PromptOptions {
        token_budget: 1200,
        format: super::super::format::PromptFormat::RmswebEcho,
        ..Default::default()
    };
    let r = render_rmsweb(
        &input("Click on the \"OK\" button.", &st, &[], None),
        &opts,
        &CharApprox,
    );
    let user = &r.messages[1].content;
    assert!(user.contains("[150]<button />OK [150]\n"), "{user}");
    assert!(r.messages[0].content.contains("text [index]`"));
    assert_eq!(r.format_version, ECHO_FORMAT_VERSION);
    assert!(r.omitted > 0 && r.tokens <= 1200, "{} tokens", r.tokens);
    // The RL prompts recover the shown elements from either layout's text.
    assert_eq!(shown_in(user, &st.elements), r.shown);
    let plain = render_rmsweb(
        &input("Click on the \"OK\" button.", &st, &[], None),
        &PromptOptions {
            format: Default::default(),
            ..opts
        },
        &CharApprox,
    );
    assert!(!plain.messages[1].content.contains("OK [150]"));
    assert!(plain.shown.len() > r.shown.len(), "the echo costs room");
}
