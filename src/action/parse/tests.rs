//! Parsing responses in every accepted form, and the errors of bad ones.

use super::short_form::clip;
use super::*;
use crate::action::Action;
use serde_json::json;

fn one(text: &str) -> Action {
    let p = parse_response(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(p.actions.len(), 1, "{text}");
    p.actions[0].clone()
}

fn err(text: &str) -> ParseError {
    parse_response(text).expect_err(text)
}

#[test]
fn flat_browser_use_output() {
    let t = r#"{"thinking": "the button", "evaluation_previous_goal": "ok", "memory": "m", "next_goal": "g", "action": [{"click": {"index": 12}}]}"#;
    let p = parse_response(t).unwrap();
    assert_eq!(p.actions, [Action::new("click", json!({"index": 12}))]);
    assert_eq!(p.thinking.as_deref(), Some("the button"));
    assert_eq!(p.evaluation_previous_goal.as_deref(), Some("ok"));
    assert_eq!(p.memory.as_deref(), Some("m"));
    assert_eq!(p.next_goal.as_deref(), Some("g"));
    assert_eq!(&t[p.action_span.clone()], r#"[{"click": {"index": 12}}]"#);
    assert_eq!(p.object_span, 0..t.len());
    assert_eq!(p.form, ResponseForm::BrowserUse);
}

#[test]
fn old_nested_current_state_form() {
    let t = r#"{"current_state": {"evaluation_previous_goal": "Success", "memory": "on page 2", "next_goal": "type"}, "action": [{"input_text": {"index": 5, "text": "alice"}}, {"click_element_by_index": {"index": 6}}]}"#;
    let p = parse_response(t).unwrap();
    assert_eq!(p.memory.as_deref(), Some("on page 2"));
    assert_eq!(p.next_goal.as_deref(), Some("type"));
    assert_eq!(
        p.actions,
        [
            Action::new("input", json!({"index": 5, "text": "alice"})),
            Action::new("click", json!({"index": 6}))
        ]
    );
}

#[test]
fn fenced_block_with_reasoning_around_it() {
    let t = "I should open the next page {maybe}.\n```json\n{\"action\": [{\"go_to_url\": {\"url\": \"https://a.test/{x}\"}}]}\n```\nThat's it.";
    let p = parse_response(t).unwrap();
    assert_eq!(p.actions[0].name, "navigate");
    assert_eq!(p.actions[0].params["url"], json!("https://a.test/{x}"));
    assert_eq!(p.actions[0].params["new_tab"], json!(false));
    assert_eq!(
        &t[p.action_span.clone()],
        "[{\"go_to_url\": {\"url\": \"https://a.test/{x}\"}}]"
    );
}

#[test]
fn json_before_free_text() {
    let t = r#"{"action":[{"done":{"text":"42 }","success":true}}]} -- done because {"#;
    let a = one(t);
    assert_eq!(
        a,
        Action::new("done", json!({"text": "42 }", "success": true}))
    );
}

#[test]
fn braces_and_quotes_inside_strings() {
    let t = r#"{"thinking": "a } brace and \"quote\" and [bracket", "action": [{"input": {"index": 1, "text": "{\"a\": [1]}"}}]}"#;
    let p = parse_response(t).unwrap();
    assert_eq!(p.actions[0].params["text"], json!("{\"a\": [1]}"));
    assert!(t[p.action_span.clone()].starts_with("[{\"input\""));
    assert!(t[p.action_span.clone()].ends_with("}}]"));
}

#[test]
fn canonical_forms() {
    let a = one(r#"{"name": "click", "params": {"index": 3}}"#);
    assert_eq!(a, Action::new("click", json!({"index": 3})));
    let t = r#"note: {"actions": [{"name": "search_google", "params": {"query": "rust"}}]}"#;
    let p = parse_response(t).unwrap();
    assert_eq!(p.form, ResponseForm::Canonical);
    assert_eq!(p.actions[0].name, "search");
    assert_eq!(p.actions[0].params["engine"], json!("google"));
    assert_eq!(
        &t[p.action_span.clone()],
        r#"[{"name": "search_google", "params": {"query": "rust"}}]"#
    );
    // A canonical item inside Browser Use's `action` list.
    let a = one(r#"{"action": [{"name": "go_back", "params": {}}]}"#);
    assert_eq!(a.name, "go_back");
}

#[test]
fn scalar_and_null_params() {
    assert_eq!(
        one(r#"{"action":[{"click": 7}]}"#),
        Action::new("click", json!({"index": 7}))
    );
    assert_eq!(one(r#"{"action":[{"go_back": null}]}"#).name, "go_back");
    assert_eq!(
        one(r#"{"action":[{"click": {"index": 4}, "input": null}]}"#),
        Action::new("click", json!({"index": 4}))
    );
}

#[test]
fn short_forms() {
    assert_eq!(one("click(12)"), Action::new("click", json!({"index": 12})));
    assert_eq!(
        one(r#"input(5, "text, with (parens)")"#),
        Action::new("input", json!({"index": 5, "text": "text, with (parens)"}))
    );
    assert_eq!(
        one(r#"navigate("https://a.test/?q=1")"#).params["url"],
        json!("https://a.test/?q=1")
    );
    assert_eq!(
        one(r#"done("The answer is 4", true)"#),
        Action::new("done", json!({"text": "The answer is 4", "success": true}))
    );
    assert_eq!(one("go_back()"), Action::new("go_back", json!({})));
    assert_eq!(
        one("scroll(down=False, pages=2.5)"),
        Action::new("scroll", json!({"down": false, "pages": 2.5}))
    );
    assert_eq!(
        one("input_text(3, 'it\\'s')"),
        Action::new("input", json!({"index": 3, "text": "it's"}))
    );
    assert_eq!(one("switch_tab(2)").params["tab_id"], json!(2));
}

#[test]
fn short_form_span_and_chains() {
    let t = "I will type the name now: input(5, \"alice\"); click(6) and then wait.";
    let p = parse_response(t).unwrap();
    assert_eq!(p.form, ResponseForm::Short);
    assert_eq!(p.actions.len(), 2);
    assert_eq!(&t[p.action_span.clone()], "input(5, \"alice\"); click(6)");
}

#[test]
fn prose_calls_are_skipped_for_real_ones() {
    // `click(the button)` is prose; `click(4)` is the action.
    let p = parse_response("I could click(the button) but better: click(4)").unwrap();
    assert_eq!(p.actions, [Action::new("click", json!({"index": 4}))]);
    // Method calls and unknown names are not actions.
    assert!(parse_response("page.click(3) or foo(3)").is_err());
}

#[test]
fn errors_name_the_problem_and_its_byte() {
    let t = r#"{"action": [{"click": {"index": 12}}"#;
    let e = err(t);
    assert_eq!(e.offset, Some(0));
    assert!(e.message.contains("never closed"), "{}", e.message);

    let t = r#"xx {"action": [{"click": {"index": 12,}}]}"#;
    let e = err(t);
    let off = e.offset.unwrap();
    assert!(
        e.message
            .starts_with(&format!("at byte {off}: invalid JSON")),
        "{}",
        e.message
    );
    assert_eq!(&t[off - 1..=off], ",}", "{}", e.message);

    let t = r#"{"action": []}"#;
    let e = err(t);
    assert_eq!(e.offset, Some(11));
    assert!(e.message.contains("empty"));

    let t = r#"{"action": [{"click": {"index": 1}}, 7]}"#;
    let e = err(t);
    assert_eq!(e.offset, Some(37));
    assert!(e.message.contains("item 2"), "{}", e.message);

    let e = err(r#"{"action": [{"click": {"index": 1}, "input": {"index": 2}}]}"#);
    assert!(e.message.contains("several actions"), "{}", e.message);

    let e = err(r#"{"action": {"click": {"index": 1}}}"#);
    assert!(e.message.contains("must be a list"), "{}", e.message);
    assert_eq!(e.offset, Some(11));

    let e = err("click(12");
    assert!(e.message.contains("never closed"), "{}", e.message);
    let e = err("click(1, 2)");
    assert!(e.message.contains("at most 1"), "{}", e.message);
    assert_eq!(e.offset, Some(0));

    let huge = format!("click(1){}", " ".repeat(MAX_RESPONSE_BYTES));
    assert!(err(&huge).message.contains("over the 1024 KiB limit"));

    let e = err("I have no idea what to do.");
    assert_eq!(e.offset, None);
    assert!(e.message.contains("no action found"));
}

fn fill(unit: &str, len: usize) -> String {
    let mut s = unit.repeat(len / unit.len() + 1);
    s.truncate(len);
    s
}

/// Thread CPU seconds (a loaded machine does not make it grow).
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `err` that fails when the parse takes more than a second of CPU (a few
/// milliseconds in a release build; minutes when every `{` rescanned the rest).
fn quick_err(text: &str) -> ParseError {
    let start = cpu_seconds();
    let e = err(text);
    let took = cpu_seconds() - start;
    assert!(took < 1.0, "{took:.2} s for {:?}…", clip(text, 12));
    e
}

#[test]
fn hostile_megabyte_candidates_get_their_answer_in_linear_time() {
    let err = quick_err;
    let n = MAX_RESPONSE_BYTES;
    let e = err(&fill("{", n));
    assert!(e.message.contains("never closed"), "{}", e.message);
    // 174k calls, each opening the next: the first one's error, or the budget.
    let e = err(&fill("click(", n));
    assert!(
        e.message.contains("is not a number") || e.message.contains("gave up"),
        "{}",
        e.message
    );
    let e = err(&fill("click({", n));
    assert!(
        e.message.contains("gave up") || e.message.contains("never closed"),
        "{}",
        e.message
    );
    let e = err(&fill(r#"{"action": ["#, n));
    assert!(
        e.message.contains("never closed") || e.message.contains("gave up"),
        "{}",
        e.message
    );
    for unit in [r#"{"a":"#, r#"{"{"#, r#"input(1, ""#, "input(1, '"] {
        let _ = err(&fill(unit, n));
    }
    // Prose full of braces and calls does not hide a real action at its end.
    let action = r#"{"action": [{"click": {"index": 3}}]}"#;
    let mut t = fill("I think {maybe} click(the button) ", n - action.len());
    t.push_str(action);
    assert_eq!(one(&t), Action::new("click", json!({"index": 3})));
}

#[test]
fn the_scan_budget_is_spent_once_per_byte_on_ordinary_text() {
    let t = format!(
        "{}{{\"action\": [{{\"go_back\": null}}]}}",
        "so {it} goes; ".repeat(5000)
    );
    let mut budget = ScanBudget::for_len(t.len());
    let start = memchr::memchr(b'{', t.as_bytes()).unwrap();
    assert!(matches!(
        parse_object(&t, start, &mut budget),
        Candidate::NotJson(_)
    ));
    assert!(budget.spent() < 4, "{}", budget.spent());
    assert_eq!(one(&t).name, "go_back");
}

#[test]
fn unknown_names_are_kept_with_a_warning() {
    let p = parse_response(r#"{"action": [{"drag": {"from": 1}}]}"#).unwrap();
    assert_eq!(p.actions[0].name, "drag");
    assert_eq!(p.warnings.len(), 1);
}

#[test]
fn first_action_object_wins_and_other_json_is_skipped() {
    let t = r#"{"note": 1} then {"action": [{"click": {"index": 1}}]} or {"action": [{"click": {"index": 2}}]}"#;
    assert_eq!(one(t).params["index"], json!(1));
}

#[test]
fn multibyte_text_keeps_spans_on_char_boundaries() {
    let t = "Ich klicke auf „Weiter“ → {\"action\": [{\"click\": {\"index\": 2}}]} ✓";
    let p = parse_response(t).unwrap();
    assert_eq!(&t[p.action_span.clone()], "[{\"click\": {\"index\": 2}}]");
}
