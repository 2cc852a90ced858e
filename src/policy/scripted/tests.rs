//! The scripted teacher: plans, mistakes at their rates, reflection, notes.

use super::*;
use crate::trajectory::State;
use std::collections::BTreeMap;

fn el(index: u32, tag: &str, text: &str, attrs: &[(&str, &str)]) -> Element {
    Element {
        index,
        tag: tag.into(),
        role: String::new(),
        text: text.into(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        bbox: [0.0; 4],
    }
}

fn task(name: &str, instr: &str) -> Task {
    Task {
        task_id: format!("miniwob/{name}/s1"),
        website: "miniwob".into(),
        domain: "miniwob".into(),
        category: name.into(),
        instruction: instr.into(),
        source: format!("miniwob:{name}"),
    }
}

fn act(t: &mut ScriptedTeacher, task: &Task, elements: Vec<Element>, hist: usize) -> PolicyOutput {
    let state = State {
        elements,
        ..Default::default()
    };
    let steps: Vec<crate::trajectory::Step> = (0..hist)
        .map(|i| crate::trajectory::Step {
            index: i as u32,
            state: State::default(),
            output: ModelOutput::default(),
            result: vec![],
            timing: None,
            ..Default::default()
        })
        .collect();
    t.act(&PolicyInput {
        task,
        state: &state,
        history: &steps,
        reflection: None,
        max_steps: 10,
        screenshot: None,
    })
    .unwrap()
}

#[test]
fn plans_cover_every_supported_task_instruction_form() {
    let cases = [
        ("click-button", "Click on the \"ok\" button."),
        ("click-link", "Click on the link \"nunc\"."),
        (
            "enter-text",
            "Enter \"Kasie\" into the text field and press Submit.",
        ),
        (
            "login-user",
            "Enter the username \"ana\" and the password \"x1\" into the text fields and press login.",
        ),
        ("click-checkboxes", "Select nothing and click Submit."),
        ("click-option", "Select Qe and click Submit."),
        ("choose-list", "Select Ulm from the list and click Submit."),
        ("focus-text-2", "Focus into the 2nd input textbox."),
        ("click-tab", "Click on Tab #2."),
        (
            "click-dialog-2",
            "Click the button in the dialog box labeled \"x\".",
        ),
        (
            "enter-password",
            "Enter the password \"Ab1\" into both text fields and press submit.",
        ),
        (
            "click-button-sequence",
            "Click button ONE, then click button TWO.",
        ),
    ];
    for (t, i) in cases {
        assert!(!plan(t, i, Goals::Own).unwrap().is_empty(), "{t}");
    }
    assert_eq!(
        plan(
            "click-checkboxes",
            "Select a1, b2 and click Submit.",
            Goals::Own
        )
        .unwrap()
        .len(),
        3
    );
    assert!(plan("drag-box", "Drag it", Goals::Own).is_err());
    assert!(ScriptedTeacher::supports("miniwob:click-tab"));
}

#[test]
fn solves_from_elements_and_writes_browser_use_json() {
    let t = task(
        "enter-text",
        "Enter \"Kasie\" into the text field and press Submit.",
    );
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    teacher.reset(&t, 7);
    let els = vec![
        el(1, "input", "", &[("id", "tt")]),
        el(2, "button", "Submit", &[("id", "subbtn")]),
    ];
    let o1 = act(&mut teacher, &t, els.clone(), 0);
    assert_eq!(
        o1.output.actions[0].short(),
        "input(1, \"Kasie\", clear=true)"
    );
    let parsed = crate::action::parse::parse_response(&o1.raw).unwrap();
    assert_eq!(parsed.actions, o1.output.actions);
    let o2 = act(&mut teacher, &t, els, 1);
    assert_eq!(o2.output.actions[0].target_index(), Some(2));
    assert!(teacher.notes().is_empty());
}

#[test]
fn a_click_names_the_elements_text_before_its_index() {
    // The order the `rmsweb-echo` prompt shows them in: `[2]<button />ok [2]`.
    let t = task("click-button", "Click on the \"ok\" button.");
    let mut teacher = ScriptedTeacher::new(MistakeRates::default());
    teacher.reset(&t, 1);
    let els = vec![el(1, "button", "no", &[]), el(2, "button", "ok", &[])];
    let o = act(&mut teacher, &t, els, 0);
    assert_eq!(
        o.output.thinking,
        "To click the \"ok\" button, click ok [2]."
    );
    let bare = el(3, "button", "", &[]);
    assert_eq!(click_thinking("go", &bare), "To go, click element [3].");
}

#[test]
fn mistakes_follow_the_rates_and_are_reproducible() {
    let t = task("click-button", "Click on the \"ok\" button.");
    let els = vec![
        el(1, "button", "no", &[]),
        el(2, "button", "ok", &[]),
        el(3, "button", "yes", &[]),
    ];
    let mut always = ScriptedTeacher::new(MistakeRates {
        misclick: 1.0,
        ..Default::default()
    });
    always.reset(&t, 1);
    let o = act(&mut always, &t, els.clone(), 0);
    assert_ne!(o.output.actions[0].target_index(), Some(2));
    assert!(always.notes()[0].starts_with("misclick@0"));
    let run = |seed| {
        let mut tt = ScriptedTeacher::new(MistakeRates::uniform(0.5));
        tt.reset(&t, seed);
        (act(&mut tt, &t, els.clone(), 0).output.actions, tt.notes())
    };
    assert_eq!(run(42), run(42));
    let distinct: std::collections::BTreeSet<String> =
        (0..40).map(|s| format!("{:?}", run(s).0)).collect();
    assert!(
        distinct.len() > 1,
        "rates of 0.5 must sometimes err and sometimes not"
    );
}

#[test]
fn a_reflection_cuts_the_mistake_rates() {
    let t = task("click-button", "Click on the \"ok\" button.");
    let els = vec![el(1, "button", "no", &[]), el(2, "button", "ok", &[])];
    let state = State {
        elements: els,
        ..Default::default()
    };
    let misclicks = |reflection: Option<&str>| {
        (0..400u64)
            .filter(|&seed| {
                let mut tt = ScriptedTeacher::new(MistakeRates {
                    misclick: 0.5,
                    ..Default::default()
                });
                tt.reset(&t, seed);
                let o = tt
                    .act(&PolicyInput {
                        task: &t,
                        state: &state,
                        history: &[],
                        reflection,
                        max_steps: 10,
                        screenshot: None,
                    })
                    .unwrap();
                o.output.actions[0].target_index() != Some(2)
            })
            .count() as f64
            / 400.0
    };
    let plain = misclicks(None);
    let reflected = misclicks(Some("Step 1 clicked the wrong button."));
    assert!((plain - 0.5).abs() < 0.1, "plain misclick rate {plain}");
    let want = 0.5 * REFLECTION_MISTAKE_FACTOR;
    assert!(
        (reflected - want).abs() < 0.07,
        "reflected rate {reflected}"
    );
    // A blank reflection is no reflection.
    assert_eq!(misclicks(Some("  ")), plain);
}

#[test]
fn wrong_values_differ_from_the_truth() {
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..50 {
        let (w, _) = corrupt("secret", &mut rng);
        assert_ne!(w, "secret");
    }
    let (w, _) = corrupt("a", &mut rng);
    assert_ne!(w, "a");
}

/// A two-box click-checkboxes page: the instruction and its elements.
fn two_boxes() -> (Task, Vec<Element>) {
    let t = task("click-checkboxes", "Select tB, nx5Zf and click Submit.");
    let els = vec![
        el(1, "input", "tB", &[("type", "checkbox")]),
        el(2, "input", "Cun", &[("type", "checkbox")]),
        el(3, "input", "nx5Zf", &[("type", "checkbox")]),
        el(4, "button", "Submit", &[("id", "subbtn")]),
    ];
    (t, els)
}

/// Four steps of the teacher on `els`, worded the `wording` way: each step's
/// thinking and actions.
fn four_steps(wording: TeacherThinking, t: &Task, els: &[Element]) -> Vec<(String, Vec<Action>)> {
    let mut tt = ScriptedTeacher::new(MistakeRates::default()).with_thinking(wording);
    tt.reset(t, 1);
    (0..4)
        .map(|step| {
            let o = act(&mut tt, t, els.to_vec(), step).output;
            (o.thinking, o.actions)
        })
        .collect()
}

/// The thinking of four steps on [`two_boxes`] worded the `wording` way, after
/// checking that only the words change: the same actions as `plain`, and `plain`'s
/// thinking is what each ends with.
fn worded(wording: TeacherThinking) -> Vec<String> {
    let (t, els) = two_boxes();
    let plain = four_steps(TeacherThinking::Plain, &t, &els);
    let other = four_steps(wording, &t, &els);
    for ((p, pa), (o, oa)) in plain.iter().zip(&other) {
        assert_eq!(pa, oa);
        assert!(o.ends_with(p.as_str()), "{o:?} after {p:?}");
    }
    other.into_iter().map(|(t, _)| t).collect()
}

#[test]
fn progress_thinking_names_the_last_finished_part_first() {
    let (t, els) = two_boxes();
    let texts = worded(TeacherThinking::Progress);
    assert_eq!(
        texts,
        [
            "Done: nothing. To check tB, click tB [1].",
            "Done: check tB. To check nx5Zf, click nx5Zf [3].",
            "Done: check nx5Zf. To press Submit, click Submit [4].",
            "Done: press Submit. Every part of the task has been carried out.",
        ]
    );
    assert_eq!(
        four_steps(TeacherThinking::Plain, &t, &els)[0].0,
        "To check tB, click tB [1]."
    );
    // A new episode starts with nothing done.
    let mut tt =
        ScriptedTeacher::new(MistakeRates::default()).with_thinking(TeacherThinking::Progress);
    tt.reset(&t, 1);
    act(&mut tt, &t, els.clone(), 0);
    tt.reset(&t, 2);
    assert!(
        act(&mut tt, &t, els, 0)
            .output
            .thinking
            .starts_with("Done: nothing.")
    );
}

#[test]
fn ledger_thinking_lists_every_finished_part_in_the_instructions_order() {
    let (_, els) = two_boxes();
    let texts = worded(TeacherThinking::Ledger);
    assert_eq!(
        texts,
        [
            "Done: (start). To check tB, click tB [1].",
            "Done: check tB. To check nx5Zf, click nx5Zf [3].",
            "Done: check tB, check nx5Zf. To press Submit, click Submit [4].",
            "Done: check tB, check nx5Zf, press Submit. Every part of the task has been carried out.",
        ]
    );
    // "Select nothing": the start marker is not the instruction's word.
    let none = task("click-checkboxes", "Select nothing and click Submit.");
    let first = &four_steps(TeacherThinking::Ledger, &none, &els)[0].0;
    assert_eq!(first, "Done: (start). To press Submit, click Submit [4].");
}

/// The teacher's first answer on a click-dialog-2 page (a close button that shows
/// `Close`, then Cancel and OK) asked for the button labeled `label`.
fn dialog_answer(label: &str, wording: TeacherThinking) -> ModelOutput {
    let els = vec![
        el(1, "div", "Close", &[]),
        el(2, "button", "Close", &[("title", "Close")]),
        el(3, "button", "Cancel", &[]),
        el(4, "button", "OK", &[]),
    ];
    let t = task(
        "click-dialog-2",
        &format!("Click the button in the dialog box labeled \"{label}\"."),
    );
    let mut tt = ScriptedTeacher::new(MistakeRates::default()).with_thinking(wording);
    tt.reset(&t, 1);
    act(&mut tt, &t, els, 0).output
}

#[test]
fn ledger_goals_of_click_dialog_2_copy_the_instructions_words_whichever_the_label() {
    for (label, index) in [("x", 2), ("Cancel", 3), ("OK", 4)] {
        let o = dialog_answer(label, TeacherThinking::Ledger);
        assert_eq!(o.next_goal, format!("click the button labeled \"{label}\""));
        assert_eq!(o.actions[0].params["index"], index, "{label}");
        // The same element as the plain wording clicks; only the goal's words differ.
        let p = dialog_answer(label, TeacherThinking::Plain);
        assert_eq!(p.actions, o.actions);
        assert_ne!(p.next_goal, o.next_goal);
        let own = if label == "x" {
            "close the dialog with its x".to_string()
        } else {
            format!("click the dialog button \"{label}\"")
        };
        assert_eq!(p.next_goal, own);
    }
}

#[test]
fn checklist_thinking_copies_what_the_instruction_still_lists() {
    let (t, els) = two_boxes();
    let texts = worded(TeacherThinking::Checklist);
    assert_eq!(
        texts,
        [
            "Done: (start). Left: tB, nx5Zf and click Submit. To check tB, click tB [1].",
            "Done: check tB. Left: nx5Zf and click Submit. To check nx5Zf, click nx5Zf [3].",
            "Done: check nx5Zf. Left: click Submit. To press Submit, click Submit [4].",
            "Done: press Submit. Every part of the task has been carried out.",
        ]
    );
    // What is left at first is the instruction's own list, word for word.
    assert!(t.instruction.contains("tB, nx5Zf and click Submit"));
    let none = task("click-checkboxes", "Select nothing and click Submit.");
    let first = &four_steps(TeacherThinking::Checklist, &none, &els)[0].0;
    assert_eq!(
        first,
        "Done: (start). Left: click Submit. To press Submit, click Submit [4]."
    );
    // A task whose instruction lists no parts gets no `Left:`.
    let button = task("click-button", "Click on the \"nx5Zf\" button.");
    let b = vec![el(1, "button", "nx5Zf", &[])];
    let first = &four_steps(TeacherThinking::Checklist, &button, &b)[0].0;
    assert_eq!(
        first,
        "Done: (start). To click the \"nx5Zf\" button, click nx5Zf [1]."
    );
}

#[test]
fn checklist_names_the_close_button_the_instruction_calls_x() {
    let answer = |label: &str| dialog_answer(label, TeacherThinking::Checklist);
    let x = answer("x");
    assert_eq!(
        x.thinking,
        "Done: (start). To click the button labeled \"x\", the close button, click Close [2]."
    );
    assert_eq!(x.actions[0].params["index"], 2);
    let ok = answer("OK");
    assert_eq!(
        ok.thinking,
        "Done: (start). To click the button labeled \"OK\", click OK [4]."
    );
}

/// The thinking of four steps on [`two_boxes`], worded `wording`, on a page titled
/// `title`.
fn on_titled_page(wording: TeacherThinking, title: &str) -> Vec<String> {
    let (t, els) = two_boxes();
    let state = State {
        title: title.to_string(),
        elements: els,
        ..Default::default()
    };
    let mut tt = ScriptedTeacher::new(MistakeRates::default()).with_thinking(wording);
    tt.reset(&t, 1);
    let mut history: Vec<crate::trajectory::Step> = Vec::new();
    (0..4)
        .map(|_| {
            let o = tt
                .act(&PolicyInput {
                    task: &t,
                    state: &state,
                    history: &history,
                    reflection: None,
                    max_steps: 10,
                    screenshot: None,
                })
                .unwrap();
            history.push(crate::trajectory::Step::default());
            o.output.thinking
        })
        .collect()
}

#[test]
fn titled_thinking_copies_the_page_title_before_the_next_part() {
    let checklist = on_titled_page(TeacherThinking::Checklist, "Click Checkboxes Task");
    let titled = on_titled_page(TeacherThinking::Titled, "Click Checkboxes Task");
    assert_eq!(
        titled[0],
        "Done: (start). Page: Click Checkboxes Task. Left: tB, nx5Zf and click Submit. \
         To check tB, click tB [1]."
    );
    // Only the title is added: the checklist's words, with `Page:` after `Done:`.
    for (c, t) in checklist.iter().zip(&titled) {
        let (done, rest) = c.split_once(". ").unwrap();
        assert_eq!(t, &format!("{done}. Page: Click Checkboxes Task. {rest}"));
    }
    // A page without a title words it as the checklist does.
    assert_eq!(on_titled_page(TeacherThinking::Titled, "  "), checklist);
    // A title is copied as the prompt shows it: no control characters from the page.
    let odd = on_titled_page(TeacherThinking::Titled, "Two\u{1b}[31m\nlines")[0].clone();
    assert!(!odd.chars().any(char::is_control), "{odd:?}");
    assert!(odd.starts_with("Done: (start). Page: Two"), "{odd:?}");
}

#[test]
fn headed_thinking_copies_the_page_title_before_everything_else() {
    let checklist = on_titled_page(TeacherThinking::Checklist, "Click Checkboxes Task");
    let headed = on_titled_page(TeacherThinking::Headed, "Click Checkboxes Task");
    assert_eq!(
        headed[0],
        "Page: Click Checkboxes Task. Done: (start). Left: tB, nx5Zf and click Submit. \
         To check tB, click tB [1]."
    );
    // Only the title is added, in front: `Done:` stays next to the part it precedes.
    for (c, h) in checklist.iter().zip(&headed) {
        assert_eq!(h, &format!("Page: Click Checkboxes Task. {c}"));
    }
    assert_eq!(on_titled_page(TeacherThinking::Headed, "  "), checklist);
    let odd = on_titled_page(TeacherThinking::Headed, "Two\u{1b}[31m\nlines")[0].clone();
    assert!(!odd.chars().any(char::is_control), "{odd:?}");
    assert!(odd.starts_with("Page: Two"), "{odd:?}");
}
