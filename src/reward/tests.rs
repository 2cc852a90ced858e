//! Table tests for every rubric row and its borders, and property tests of the
//! rubric's guarantees.

use super::*;
use crate::action::render::render_actions;
use serde_json::json;
use std::collections::BTreeMap;

fn el(index: u32, tag: &str, text: &str, attrs: &[(&str, &str)]) -> Element {
    Element {
        index,
        tag: tag.into(),
        text: text.into(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        ..Element::default()
    }
}

/// A small search-results page.
fn page() -> Vec<Element> {
    vec![
        el(0, "input", "", &[("placeholder", "Search"), ("name", "q")]),
        el(5, "input", "", &[("aria-label", "First name")]),
        el(6, "input", "", &[("aria-label", "First name")]),
        el(7, "input", "", &[("aria-label", "Last name")]),
        el(11, "a", "Previous", &[("href", "/p/0")]),
        el(12, "button", "Search", &[]),
        el(13, "a", "Next", &[("href", "/p/2")]),
        el(14, "a", "Next ›", &[("href", "/p/2")]),
        el(15, "a", "Next", &[("href", "/p/3")]),
        el(20, "select", "Country", &[]),
        el(21, "select", "country", &[]),
        el(30, "div", "", &[]),
        el(31, "div", "", &[]),
        el(40, "div", "Results", &[]),
    ]
}

fn a(name: &str, params: serde_json::Value) -> Action {
    Action::new(name, params)
}

/// (target, candidate response, expected score, expected rule)
fn table() -> Vec<(Action, &'static str, f64, &'static str)> {
    vec![
        // click
        (
            a("click", json!({"index": 13})),
            "click(13)",
            1.0,
            "click.same_index",
        ),
        (
            a("click", json!({"index": 13})),
            r#"{"action":[{"click_element_by_index":{"index":13}}]}"#,
            1.0,
            "click.same_index",
        ),
        (
            a("click", json!({"index": 13})),
            "click(14)",
            0.7,
            "click.equivalent_element",
        ),
        (
            a("click", json!({"index": 13})),
            "click(12)",
            0.3,
            "click.other_element",
        ),
        (
            a("click", json!({"index": 13})),
            "click(15)",
            0.3,
            "click.other_element",
        ),
        (
            a("click", json!({"index": 30})),
            "click(31)",
            0.3,
            "click.other_element",
        ),
        (
            a("click", json!({"index": 13})),
            "click(99)",
            0.0,
            "index.absent",
        ),
        (
            a("click", json!({"index": 13})),
            r#"{"action":[{"click":{}}]}"#,
            0.0,
            "params.missing",
        ),
        (
            a("dropdown_options", json!({"index": 20})),
            "dropdown_options(21)",
            0.7,
            "dropdown_options.equivalent_element",
        ),
        // input / select_dropdown
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(5, "alice ")"#,
            1.0,
            "input.same",
        ),
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(5, "ALICE!")"#,
            0.7,
            "input.normalized_text",
        ),
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(6, "Alice")"#,
            0.7,
            "input.equivalent_element",
        ),
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(7, "alice")"#,
            0.3,
            "input.other_element",
        ),
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(5, "bob")"#,
            0.3,
            "input.other_text",
        ),
        (
            a("input", json!({"index": 0, "text": "room 12"})),
            r#"input(0, "room 13")"#,
            0.3,
            "key_tokens.mismatch",
        ),
        (
            a("input", json!({"index": 5, "text": "alice"})),
            r#"input(55, "alice")"#,
            0.0,
            "index.absent",
        ),
        (
            a("select_dropdown", json!({"index": 20, "text": "France"})),
            r#"select_dropdown_option(20, "France")"#,
            1.0,
            "select_dropdown.same",
        ),
        (
            a("select_dropdown", json!({"index": 20, "text": "France"})),
            r#"select_dropdown(21, "france")"#,
            0.7,
            "select_dropdown.equivalent_element",
        ),
        // navigate
        (
            a(
                "navigate",
                json!({"url": "https://f.test/s?from=SFO&date=2024-05-01"}),
            ),
            r#"navigate("https://f.test/s?from=SFO&date=2024-05-01")"#,
            1.0,
            "navigate.same_url",
        ),
        (
            a(
                "navigate",
                json!({"url": "https://f.test/s?from=SFO&date=2024-05-01"}),
            ),
            r#"navigate("https://F.test/s?date=2024-05-01&utm_source=ads&from=SFO")"#,
            0.7,
            "navigate.normalized_url",
        ),
        (
            a("navigate", json!({"url": "https://f.test/s/"})),
            r#"go_to_url("https://f.test:443/s#top")"#,
            0.7,
            "navigate.normalized_url",
        ),
        (
            a(
                "navigate",
                json!({"url": "https://f.test/s?from=SFO&date=2024-05-01"}),
            ),
            r#"navigate("https://f.test/s?from=SFO&date=2024-05-02")"#,
            0.3,
            "navigate.other_query",
        ),
        (
            a("navigate", json!({"url": "https://f.test/s"})),
            r#"navigate("https://g.test/s")"#,
            0.3,
            "navigate.other_host",
        ),
        (
            a("navigate", json!({"url": "https://f.test/s"})),
            r#"navigate("http://f.test/s")"#,
            0.3,
            "navigate.other_url",
        ),
        // search
        (
            a("search", json!({"query": "cheap flights paris"})),
            r#"search(" cheap flights paris ")"#,
            1.0,
            "search.same_query",
        ),
        (
            a("search", json!({"query": "cheap flights paris"})),
            r#"search("Paris cheap flights")"#,
            0.7,
            "search.same_tokens",
        ),
        (
            a("search", json!({"query": "cheap flights paris london"})),
            r#"search("cheap flights paris london tonight")"#,
            0.7,
            "search.similar_query",
        ),
        (
            a("search", json!({"query": "cheap flights paris"})),
            r#"search("cheap flights paris tonight")"#,
            0.3,
            "search.other_query",
        ),
        (
            a("search", json!({"query": "hotels paris 2024"})),
            r#"search("hotels paris 2025")"#,
            0.3,
            "key_tokens.mismatch",
        ),
        // extract / find_text
        (
            a("extract", json!({"query": "the price"})),
            r#"extract("The price.")"#,
            0.7,
            "extract.normalized_query",
        ),
        (
            a("extract", json!({"query": "price rating"})),
            r#"extract("price rating reviews stock")"#,
            0.7,
            "extract.similar_query",
        ),
        (
            a("extract", json!({"query": "price"})),
            r#"extract("price rating reviews")"#,
            0.3,
            "extract.other_query",
        ),
        (
            a("find_text", json!({"text": "Reviews"})),
            r#"find_text("reviews")"#,
            0.7,
            "find_text.normalized_text",
        ),
        // scroll
        (
            a("scroll", json!({"down": true, "pages": 1.0})),
            "scroll(True, 1)",
            1.0,
            "scroll.same",
        ),
        (
            a("scroll", json!({"down": true, "pages": 1.0})),
            "scroll(down=true, pages=3)",
            0.7,
            "scroll.other_amount",
        ),
        (
            a("scroll", json!({"down": true, "pages": 1.0})),
            "scroll(down=false, pages=1)",
            0.3,
            "scroll.other_direction",
        ),
        (
            a("scroll", json!({"down": true, "index": 40})),
            "scroll(down=true, index=13)",
            0.3,
            "scroll.other_element",
        ),
        // send_keys
        (
            a("send_keys", json!({"keys": "Enter"})),
            r#"send_keys("Enter")"#,
            1.0,
            "send_keys.same_keys",
        ),
        (
            a("send_keys", json!({"keys": "Control+Shift+t"})),
            r#"send_keys("shift+ctrl+T")"#,
            0.7,
            "send_keys.same_chord",
        ),
        (
            a("send_keys", json!({"keys": "Enter"})),
            r#"send_keys("Return")"#,
            0.7,
            "send_keys.same_chord",
        ),
        (
            a("send_keys", json!({"keys": "Enter"})),
            r#"send_keys("Tab")"#,
            0.3,
            "send_keys.other_keys",
        ),
        // switch / close
        (
            a("switch", json!({"tab_id": "2"})),
            "switch_tab(2)",
            1.0,
            "switch.same_tab",
        ),
        (
            a("switch", json!({"tab_id": "2"})),
            "switch(3)",
            0.3,
            "switch.other_tab",
        ),
        (
            a("close", json!({"tab_id": "a1"})),
            r#"close("a1")"#,
            1.0,
            "close.same_tab",
        ),
        // done
        (
            a(
                "done",
                json!({"text": "The cheapest is $120 on May 1", "success": true}),
            ),
            r#"done("The cheapest is $120 on May 1", true)"#,
            1.0,
            "done.same_text",
        ),
        (
            a(
                "done",
                json!({"text": "The cheapest is $120 on May 1", "success": true}),
            ),
            r#"done("The cheapest is $120 on May 1", false)"#,
            0.3,
            "done.wrong_success_flag",
        ),
        (
            a(
                "done",
                json!({"text": "The cheapest is $120 on May 1", "success": true}),
            ),
            r#"done("The cheapest is 120 dollars, on May 1st", true)"#,
            0.7,
            "done.similar_text",
        ),
        (
            a(
                "done",
                json!({"text": "The cheapest is $120 on May 1", "success": true}),
            ),
            r#"done("The cheapest is $125 on May 1", true)"#,
            0.3,
            "key_tokens.mismatch",
        ),
        (
            a(
                "done",
                json!({"text": "The cheapest is $120 on May 1", "success": true}),
            ),
            r#"done("I found flights for 120 on May 1 after searching many airline sites today", true)"#,
            0.3,
            "done.other_text",
        ),
        // go_back, wait
        (a("go_back", json!({})), "go_back()", 1.0, "go_back.always"),
        (
            a("wait", json!({"seconds": 3})),
            "wait()",
            1.0,
            "wait.same_seconds",
        ),
        (
            a("wait", json!({"seconds": 3})),
            "wait(5)",
            0.7,
            "wait.other_seconds",
        ),
        // another type, invalid, unknown
        (
            a("click", json!({"index": 13})),
            r#"input(13, "x")"#,
            0.0,
            "type.other",
        ),
        (
            a("navigate", json!({"url": "https://f.test"})),
            "go_back()",
            0.0,
            "type.other",
        ),
        (
            a("click", json!({"index": 13})),
            "I would click the next link",
            0.0,
            "parse.invalid",
        ),
        (
            a("click", json!({"index": 13})),
            r#"{"action": [{"hover": {"index": 13}}]}"#,
            0.0,
            "type.other",
        ),
        (
            a("hover", json!({"index": 13})),
            r#"{"action": [{"hover": {"index": 12}}]}"#,
            0.0,
            "action.unknown",
        ),
    ]
}

#[test]
fn every_rubric_row_and_border() {
    let cfg = RewardConfig::default();
    let elements = page();
    let mut failures = Vec::new();
    for (target, candidate, want, rule) in table() {
        let d = score(candidate, &target, &elements, &cfg);
        if d.score != want || d.rule != rule || d.level.score() != d.score || d.reason.is_empty() {
            failures.push(format!(
                "target {} candidate {candidate}: want {want} {rule}, got {} {} ({})",
                target.short(),
                d.score,
                d.rule,
                d.reason
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn reasons_quote_the_concrete_values() {
    let cfg = RewardConfig::default();
    let e = page();
    let t = a("click", json!({"index": 13}));
    let d = score("click(14)", &t, &e, &cfg);
    assert_eq!(d.reason, r#"index 14 is a <a> "Next ›" like target 13"#);
    let d = score("click(12)", &t, &e, &cfg);
    assert_eq!(
        d.reason,
        r#"index 12 is <button> "Search", target 13 is <a> "Next""#
    );
    let d = score("click(99)", &t, &e, &cfg);
    assert_eq!(d.reason, "index 99 is not among the state's 14 elements");
    let nav = a(
        "navigate",
        json!({"url": "https://f.test/s?date=2024-05-01"}),
    );
    let d = score(
        r#"navigate("https://f.test/s?date=2024-05-02")"#,
        &nav,
        &e,
        &cfg,
    );
    assert_eq!(
        d.reason,
        r#"query "date": "2024-05-02" vs target "2024-05-01""#
    );
    let done = a("done", json!({"text": "x", "success": true}));
    let d = score(r#"done("x", false)"#, &done, &e, &cfg);
    assert_eq!(d.reason, "success=false, target success=true");
    let d = score(
        "{\"action\": [{\"click\": {\"index\": 13,}}]}",
        &t,
        &e,
        &cfg,
    );
    assert!(
        d.reason.starts_with("at byte 35: invalid JSON"),
        "{}",
        d.reason
    );
}

#[test]
fn web_text_in_reasons_is_cleaned() {
    let e = vec![
        el(1, "a", "evil\u{1b}]0;title\u{7}x", &[]),
        el(2, "a", "ok", &[]),
    ];
    let d = score(
        "click(1)",
        &a("click", json!({"index": 2})),
        &e,
        &RewardConfig::default(),
    );
    assert!(!d.reason.chars().any(|c| c.is_control()), "{:?}", d.reason);
}

#[test]
fn empty_element_list_skips_element_checks_and_says_so() {
    let cfg = RewardConfig::default();
    let t = a("click", json!({"index": 13}));
    let d = score("click(99)", &t, &[], &cfg);
    assert_eq!((d.score, d.rule.as_str()), (0.3, "click.other_element"));
    assert!(d.reason.contains("element checks skipped"), "{}", d.reason);
    assert_eq!(score("click(13)", &t, &[], &cfg).score, 1.0);
}

#[test]
fn target_index_missing_from_elements_is_still_exact_for_the_same_index() {
    let d = score(
        "click(77)",
        &a("click", json!({"index": 77})),
        &page(),
        &RewardConfig::default(),
    );
    assert_eq!(d.score, 1.0);
}

#[test]
fn multi_action_steps() {
    let cfg = RewardConfig::default();
    let e = page();
    let step = [
        a("input", json!({"index": 5, "text": "alice"})),
        a("click", json!({"index": 12})),
    ];
    let both =
        r#"{"action": [{"input": {"index": 5, "text": "alice"}}, {"click": {"index": 12}}]}"#;
    let d = score_against(both, &step, &e, &cfg);
    assert_eq!((d.score, d.rule.as_str()), (1.0, "multi.exact"));
    let only_first = r#"input(5, "alice")"#;
    let d = score_against(only_first, &step, &e, &cfg);
    assert_eq!((d.score, d.rule.as_str()), (0.7, "multi.rest_differs"));
    assert!(d.reason.contains("click(12)"), "{}", d.reason);
    let other_second = r#"input(5, "alice"); click(13)"#;
    assert_eq!(score_against(other_second, &step, &e, &cfg).score, 0.7);
    // The first action decides when it is not exact.
    let d = score_against(r#"input(5, "Alice"); click(12)"#, &step, &e, &cfg);
    assert_eq!((d.score, d.rule.as_str()), (0.7, "input.normalized_text"));
    let d = score_against("click(12)", &step, &e, &cfg);
    assert_eq!(d.score, 0.0);
    // A single target ignores the candidate's later actions.
    assert_eq!(score(both, &step[0], &e, &cfg).score, 1.0);
    assert_eq!(score_against(both, &[], &e, &cfg).rule, "target.empty");
}

#[test]
fn config_thresholds_change_decisions() {
    let e = page();
    let t = a("search", json!({"query": "cheap flights paris"}));
    let c = r#"search("cheap flights paris tonight")"#;
    assert_eq!(score(c, &t, &e, &RewardConfig::default()).score, 0.3);
    let loose = RewardConfig {
        search_jaccard: 0.75,
        ..RewardConfig::default()
    };
    assert_eq!(score(c, &t, &e, &loose).score, 0.7);
    let nav = a("navigate", json!({"url": "https://f.test/?utm_source=x"}));
    let keep_utm = RewardConfig {
        strip_query_params: vec![],
        ..RewardConfig::default()
    };
    assert_eq!(
        score(r#"navigate("https://f.test/")"#, &nav, &e, &keep_utm).score,
        0.3
    );
    assert_eq!(
        score(
            r#"navigate("https://f.test/")"#,
            &nav,
            &e,
            &RewardConfig::default()
        )
        .score,
        0.7
    );
    let w = a("wait", json!({"seconds": 3}));
    let tolerant = RewardConfig {
        wait_seconds_tolerance: 2.0,
        ..RewardConfig::default()
    };
    assert_eq!(score("wait(5)", &w, &e, &tolerant).score, 1.0);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn words() -> impl Strategy<Value = String> {
        "[a-z]{1,8}( [a-z]{1,8}){0,4}"
    }

    /// A well-formed target of any canonical type, indices among `page()`'s.
    fn target() -> impl Strategy<Value = Action> {
        let idx = proptest::sample::select(page().iter().map(|e| e.index).collect::<Vec<_>>());
        prop_oneof![
            idx.clone().prop_map(|i| a("click", json!({"index": i}))),
            (idx.clone(), words()).prop_map(|(i, t)| a("input", json!({"index": i, "text": t}))),
            (idx.clone(), words())
                .prop_map(|(i, t)| a("select_dropdown", json!({"index": i, "text": t}))),
            idx.clone()
                .prop_map(|i| a("dropdown_options", json!({"index": i}))),
            (idx, "[a-z]{1,8}").prop_map(|(i, p)| a(
                "upload_file",
                json!({"index": i, "path": format!("/tmp/{p}.pdf")})
            )),
            ("[a-z]{1,8}", "[a-z]{1,8}", 0u32..100).prop_map(|(h, p, n)| a(
                "navigate",
                json!({"url": format!("https://{h}.test/{p}?n={n}"), "new_tab": false})
            )),
            words().prop_map(|q| a("search", json!({"query": q}))),
            words().prop_map(|q| a("extract", json!({"query": q}))),
            words().prop_map(|t| a("find_text", json!({"text": t}))),
            (any::<bool>(), 1u32..5).prop_map(|(d, p)| a("scroll", json!({"down": d, "pages": p}))),
            "(Control\\+)?[a-z]".prop_map(|k| a("send_keys", json!({"keys": k}))),
            (0u32..9).prop_map(|t| a("switch", json!({"tab_id": t.to_string()}))),
            (0u32..9).prop_map(|t| a("close", json!({"tab_id": t.to_string()}))),
            Just(a("go_back", json!({}))),
            (0u32..10).prop_map(|s| a("wait", json!({"seconds": s}))),
            (words(), any::<bool>()).prop_map(|(t, s)| a("done", json!({"text": t, "success": s}))),
        ]
    }

    fn is_level(s: f64) -> bool {
        [0.0, 0.3, 0.7, 1.0].contains(&s)
    }

    proptest! {
        #[test]
        fn an_exact_candidate_scores_one(t in target(), with_elements in any::<bool>()) {
            let elements = if with_elements { page() } else { vec![] };
            let cfg = RewardConfig::default();
            prop_assert_eq!(score_action(&t, &t, &elements, &cfg).score, 1.0);
            let text = format!("{{\"action\": {}}}", render_actions(std::slice::from_ref(&t)));
            let d = score(&text, &t, &elements, &cfg);
            prop_assert_eq!(d.score, 1.0, "{} {}", d.rule, d.reason);
        }

        #[test]
        fn another_action_type_scores_zero(t in target(), c in target()) {
            prop_assume!(t.name != c.name);
            let d = score_action(&c, &t, &page(), &RewardConfig::default());
            prop_assert_eq!(d.score, 0.0);
            prop_assert_eq!(d.rule, "type.other");
        }

        #[test]
        fn scores_are_always_one_of_the_four_levels(
            t in target(),
            c in target(),
            text in ".{0,80}",
        ) {
            let cfg = RewardConfig::default();
            let d = score_action(&c, &t, &page(), &cfg);
            prop_assert!(is_level(d.score) && d.score == d.level.score());
            let d = score(&text, &t, &page(), &cfg);
            prop_assert!(is_level(d.score) && d.score == d.level.score());
            prop_assert!(!d.reason.chars().any(char::is_control));
        }

        #[test]
        fn a_changed_number_never_scores_above_type(
            kind in 0usize..7,
            before in words(),
            after in words(),
            n in 0u32..100_000,
            delta in 1u32..1000,
            date_day in 1u32..28,
        ) {
            let (old, new) = if kind == 6 {
                (format!("2024-05-{date_day:02}"), format!("2024-05-{:02}", date_day + 1))
            } else {
                (n.to_string(), (n + delta).to_string())
            };
            let text = |num: &str| format!("{before} {num} {after}");
            let make = |num: &str| match kind {
                0 => a("input", json!({"index": 5, "text": text(num)})),
                1 => a("select_dropdown", json!({"index": 20, "text": text(num)})),
                2 => a("search", json!({"query": text(num)})),
                3 => a("extract", json!({"query": text(num)})),
                4 => a("done", json!({"text": text(num), "success": true})),
                5 => a("navigate", json!({"url": format!("https://a.test/{before}/{num}?q={after}")})),
                _ => a("done", json!({"text": text(num), "success": true})),
            };
            let d = score_action(&make(&new), &make(&old), &page(), &RewardConfig::default());
            prop_assert!(d.score <= 0.3, "{} {} {}", d.score, d.rule, d.reason);
        }

        #[test]
        fn arbitrary_targets_and_responses_never_panic(
            name in "[a-z_]{1,12}",
            params in proptest::collection::btree_map("[a-z_]{1,6}", prop_oneof![
                any::<i64>().prop_map(serde_json::Value::from),
                ".{0,12}".prop_map(serde_json::Value::from),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
            ], 0..4),
            text in r#"[{}\[\]":,a-z0-9()\\ =.]{0,100}"#,
        ) {
            let t = Action { name, params: params.into_iter().collect() };
            let d = score(&text, &t, &page(), &RewardConfig::default());
            prop_assert!(is_level(d.score));
            let d = score_action(&t, &t, &page(), &RewardConfig::default());
            prop_assert!(is_level(d.score));
        }
    }
}
