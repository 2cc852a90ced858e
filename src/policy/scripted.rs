//! A scripted MiniWoB++ teacher: a stand-in for an LLM teacher, NOT a model.
//!
//! It reads the task instruction with a per-task pattern, turns it into a plan of
//! intents (click an element with this text, type this value into that field, ...),
//! and resolves each intent against the element list it observes, so it acts only
//! through the same observation and actions a model has. Its trajectories say
//! `teacher: "scripted-miniwob"`.
//!
//! To produce realistic failures for mining, it makes mistakes at configurable rates
//! ([`MistakeRates`]), drawn from a generator seeded by the episode seed, so runs are
//! reproducible:
//! - **misclick**: a click goes to a distractor (the nearest other element of the
//!   same kind) instead of the target;
//! - **wrong value**: typed or selected text is wrong (another word, another option)
//!   or partial (cut short);
//! - **premature done**: it declares the task done before the plan is finished;
//! - **detour**: it makes one useless step (a scroll) before resuming the plan.
//!
//! **Reflection**: when its input carries a reflection ([`PolicyInput::reflection`]),
//! every mistake rate is multiplied by [`REFLECTION_MISTAKE_FACTOR`] (0.3). This
//! stands in for an LLM teacher that reads the lesson in its prompt and errs less;
//! the scripted teacher does not parse the text, only its presence.
//!
//! Each injected mistake is reported by [`Policy::notes`] so the evaluation can
//! record it in the trajectory's outcome reason.

use super::{Policy, PolicyInput, PolicyOutput};
use crate::action::Action;
use crate::trajectory::{Element, ModelOutput, Task};
use anyhow::{Result, bail};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regex::Regex;
use serde_json::{Value, json};

/// The teacher name written into trajectories.
pub const TEACHER_NAME: &str = "scripted-miniwob";

/// The MiniWoB tasks the teacher can solve.
pub const SUPPORTED_TASKS: &[&str] = &[
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-collapsible",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-option",
    "click-tab",
    "click-test",
    "click-test-2",
    "choose-list",
    "enter-password",
    "enter-text",
    "focus-text",
    "focus-text-2",
    "login-user",
];

/// Factor applied to every mistake rate when the attempt carries a reflection.
pub const REFLECTION_MISTAKE_FACTOR: f64 = 0.3;

/// Probabilities (0..=1) of each mistake mode, drawn per step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MistakeRates {
    pub misclick: f64,
    pub wrong_value: f64,
    pub premature_done: f64,
    pub detour: f64,
}

impl MistakeRates {
    /// The same rate for every mode.
    pub fn uniform(rate: f64) -> MistakeRates {
        MistakeRates {
            misclick: rate,
            wrong_value: rate,
            premature_done: rate,
            detour: rate,
        }
    }

    /// Every rate multiplied by `f`.
    pub fn scaled(self, f: f64) -> MistakeRates {
        MistakeRates {
            misclick: self.misclick * f,
            wrong_value: self.wrong_value * f,
            premature_done: self.premature_done * f,
            detour: self.detour * f,
        }
    }
}

/// Which elements an intent addresses.
#[derive(Debug, Clone, Default, PartialEq)]
struct Matcher {
    /// Allowed tags (empty: any).
    tags: Vec<&'static str>,
    /// Allowed roles (empty: any).
    roles: Vec<&'static str>,
    /// Accepted texts (case-insensitive, trimmed; empty: any).
    texts: Vec<String>,
    /// Required `id`.
    id: Option<&'static str>,
    /// Which of the matching elements, in page order.
    nth: usize,
}

impl Matcher {
    fn tags(tags: &[&'static str]) -> Matcher {
        Matcher {
            tags: tags.to_vec(),
            ..Default::default()
        }
    }
    fn text(mut self, t: &str) -> Matcher {
        self.texts.push(t.trim().to_lowercase());
        self
    }
    fn nth(mut self, n: usize) -> Matcher {
        self.nth = n;
        self
    }
    fn id(mut self, id: &'static str) -> Matcher {
        self.id = Some(id);
        self
    }
    fn kind_matches(&self, e: &Element) -> bool {
        (self.tags.is_empty() || self.tags.contains(&e.tag.as_str()))
            && (self.roles.is_empty() || self.roles.contains(&e.role.as_str()))
    }
    fn matches(&self, e: &Element) -> bool {
        if !self.kind_matches(e) {
            return false;
        }
        if let Some(id) = self.id
            && e.attrs.get("id").map(String::as_str) != Some(id)
        {
            return false;
        }
        if self.texts.is_empty() {
            return true;
        }
        let mut names = vec![e.text.trim().to_lowercase()];
        for k in ["title", "aria-label", "value"] {
            if let Some(v) = e.attrs.get(k) {
                names.push(v.trim().to_lowercase());
            }
        }
        names.iter().any(|n| self.texts.contains(n))
    }
    fn resolve<'e>(&self, elements: &'e [Element]) -> Option<&'e Element> {
        elements.iter().filter(|e| self.matches(e)).nth(self.nth)
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
enum Intent {
    Click(Matcher, String),
    Input(Matcher, String, String),
    Select(Matcher, String, String),
}

impl Intent {
    fn goal(&self) -> &str {
        match self {
            Intent::Click(_, g) | Intent::Input(_, _, g) | Intent::Select(_, _, g) => g,
        }
    }
}

fn quoted(instr: &str) -> Vec<String> {
    let re = Regex::new(r#""([^"]*)""#).expect("static regex");
    re.captures_iter(instr).map(|c| c[1].to_string()).collect()
}

fn submit(label: &str) -> Intent {
    Intent::Click(
        Matcher::tags(&["button", "input"]).text(label),
        format!("press {label}"),
    )
}

fn close_button() -> Matcher {
    Matcher::tags(&["button", "a", "span"])
        .text("x")
        .text("close")
        .text("×")
}

/// Turns an instruction of a supported task into a plan.
fn plan(task: &str, instr: &str) -> Result<Vec<Intent>> {
    let q = quoted(instr);
    let first = || -> Result<String> {
        q.first()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no quoted value in {instr:?}"))
    };
    let cap = |pat: &str| -> Result<String> {
        let re = Regex::new(pat).expect("static regex");
        re.captures(instr)
            .map(|c| c[1].trim().to_string())
            .ok_or_else(|| anyhow::anyhow!("instruction {instr:?} does not match {pat}"))
    };
    let text_field = || Matcher::tags(&["input", "textarea"]).nth(0);
    Ok(match task {
        "click-button" => {
            let t = first()?;
            vec![Intent::Click(
                Matcher::tags(&["button"]).text(&t),
                format!("click the {t:?} button"),
            )]
        }
        "click-link" => {
            let t = first()?;
            vec![Intent::Click(
                Matcher::default().text(&t),
                format!("click the link {t:?}"),
            )]
        }
        "click-test" => vec![Intent::Click(
            Matcher::tags(&["button"]),
            "click the button".into(),
        )],
        "click-test-2" => {
            let t = cap(r"Click button (\w+)")?;
            vec![Intent::Click(
                Matcher::tags(&["button"]).text(&t),
                format!("click button {t}"),
            )]
        }
        "click-button-sequence" => {
            let a = cap(r"Click button (\w+),")?;
            let b = cap(r"then click button (\w+)")?;
            vec![
                Intent::Click(
                    Matcher::tags(&["button"]).text(&a),
                    format!("click button {a}"),
                ),
                Intent::Click(
                    Matcher::tags(&["button"]).text(&b),
                    format!("click button {b}"),
                ),
            ]
        }
        "enter-text" => {
            let t = first()?;
            vec![
                Intent::Input(
                    text_field(),
                    t.clone(),
                    format!("type {t:?} into the text field"),
                ),
                submit("Submit"),
            ]
        }
        "login-user" => {
            if q.len() < 2 {
                bail!("login-user: expected a quoted username and password in {instr:?}");
            }
            vec![
                Intent::Input(
                    Matcher::tags(&["input"]).id("username"),
                    q[0].clone(),
                    format!("type the username {:?}", q[0]),
                ),
                Intent::Input(
                    Matcher::tags(&["input"]).id("password"),
                    q[1].clone(),
                    "type the password".into(),
                ),
                submit("Login"),
            ]
        }
        "enter-password" => {
            let p = first()?;
            vec![
                Intent::Input(
                    Matcher::tags(&["input"]).id("password"),
                    p.clone(),
                    "type the password".into(),
                ),
                Intent::Input(
                    Matcher::tags(&["input"]).id("verify"),
                    p,
                    "type the password again".into(),
                ),
                submit("Submit"),
            ]
        }
        "click-checkboxes" => {
            let list = cap(r"^Select (.*) and click Submit")?;
            let mut v = Vec::new();
            if list != "nothing" {
                for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    v.push(Intent::Click(
                        Matcher::tags(&["input"]).text(name),
                        format!("check {name}"),
                    ));
                }
            }
            v.push(submit("Submit"));
            v
        }
        "click-option" => {
            let name = cap(r"^Select (.*) and click Submit")?;
            vec![
                Intent::Click(
                    Matcher::tags(&["input"]).text(&name),
                    format!("choose {name}"),
                ),
                submit("Submit"),
            ]
        }
        "choose-list" => {
            let item = cap(r"^Select (.*) from the list")?;
            vec![
                Intent::Select(
                    Matcher::tags(&["select"]),
                    item.clone(),
                    format!("select {item}"),
                ),
                submit("Submit"),
            ]
        }
        "focus-text" => vec![Intent::Click(text_field(), "focus the textbox".into())],
        "focus-text-2" => {
            let ord = cap(r"Focus into the (\d)(?:st|nd|rd|th) input")?;
            let n: usize = ord.parse().unwrap_or(1);
            vec![Intent::Click(
                Matcher::tags(&["input"]).nth(n.saturating_sub(1)),
                format!("focus the textbox number {n}"),
            )]
        }
        "click-tab" => {
            let n = cap(r"Click on Tab #(\d+)")?;
            let label = format!("Tab #{n}");
            vec![Intent::Click(
                Matcher::tags(&["a"]).text(&label),
                format!("open {label}"),
            )]
        }
        "click-dialog" => vec![Intent::Click(close_button(), "close the dialog".into())],
        "click-dialog-2" => {
            let t = first()?;
            if t == "x" {
                vec![Intent::Click(
                    close_button(),
                    "close the dialog with its x".into(),
                )]
            } else {
                vec![Intent::Click(
                    Matcher::tags(&["button"]).text(&t),
                    format!("click the dialog button {t:?}"),
                )]
            }
        }
        "click-collapsible" => vec![
            Intent::Click(
                Matcher {
                    roles: vec!["tab", "button"],
                    tags: vec!["h3", "div", "button"],
                    ..Default::default()
                },
                "expand the section".into(),
            ),
            submit("Submit"),
        ],
        other => bail!(
            "the scripted teacher does not know the task `{other}` (it knows: {})",
            SUPPORTED_TASKS.join(", ")
        ),
    })
}

/// The scripted MiniWoB teacher (see the module docs).
pub struct ScriptedTeacher {
    rates: MistakeRates,
    rng: StdRng,
    task: String,
    plan: Option<Vec<Intent>>,
    pos: usize,
    detoured_at: Option<usize>,
    notes: Vec<String>,
}

impl ScriptedTeacher {
    /// A teacher making mistakes at the given rates.
    pub fn new(rates: MistakeRates) -> ScriptedTeacher {
        ScriptedTeacher {
            rates,
            rng: StdRng::seed_from_u64(0),
            task: String::new(),
            plan: None,
            pos: 0,
            detoured_at: None,
            notes: Vec::new(),
        }
    }

    /// Whether a task (with or without the `miniwob:` prefix) is supported.
    pub fn supports(task: &str) -> bool {
        SUPPORTED_TASKS.contains(&crate::env::miniwob::task_name(task))
    }

    fn roll(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    fn output(&self, thinking: String, goal: &str, action: Action, step: usize) -> PolicyOutput {
        let output = ModelOutput {
            thinking,
            evaluation_previous_goal: if step == 0 {
                String::new()
            } else {
                "Success: the previous action was executed.".into()
            },
            memory: format!(
                "Plan step {} of {}.",
                (self.pos + 1).min(self.plan_len()),
                self.plan_len()
            ),
            next_goal: goal.to_string(),
            actions: vec![action],
        };
        PolicyOutput {
            raw: browser_use_json(&output),
            output,
            parse_error: None,
        }
    }

    fn plan_len(&self) -> usize {
        self.plan.as_ref().map_or(0, Vec::len)
    }
}

/// The thinking of a click: the element's text as the page shows it, then its index
/// (`To open Tab #1, click Tab #1 [3].`), the order in which the `rmsweb-echo`
/// prompt shows them, so a model copies the index that follows the text it has just
/// written. An element without text is named by its index alone.
fn click_thinking(goal: &str, e: &Element) -> String {
    let text = crate::env::observe::shown_text(e);
    if text.trim().is_empty() {
        format!("To {goal}, click element [{}].", e.index)
    } else {
        format!("To {goal}, click {text} [{}].", e.index)
    }
}

/// The Browser Use JSON form of an output (what a model would have written).
pub fn browser_use_json(o: &ModelOutput) -> String {
    let actions: Vec<Value> = o
        .actions
        .iter()
        .map(|a| json!({ a.name.clone(): Value::Object(a.params.clone()) }))
        .collect();
    json!({
        "thinking": o.thinking,
        "evaluation_previous_goal": o.evaluation_previous_goal,
        "memory": o.memory,
        "next_goal": o.next_goal,
        "action": actions,
    })
    .to_string()
}

/// A wrong or partial version of a value.
fn corrupt(value: &str, rng: &mut StdRng) -> (String, &'static str) {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() > 1 && rng.random_bool(0.5) {
        let keep = rng.random_range(1..chars.len());
        (chars[..keep].iter().collect(), "partial value")
    } else {
        let mut w: Vec<char> = chars.iter().rev().copied().collect();
        if w == chars {
            w.push('x');
        }
        (w.into_iter().collect(), "wrong value")
    }
}

impl Policy for ScriptedTeacher {
    fn name(&self) -> String {
        TEACHER_NAME.to_string()
    }

    fn reset(&mut self, task: &Task, seed: u64) {
        let name = task
            .source
            .strip_prefix("miniwob:")
            .unwrap_or(&task.category)
            .to_string();
        let mut h: u64 = 0xcbf29ce484222325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
        self.rng = StdRng::seed_from_u64(seed ^ h);
        self.task = name;
        self.plan = None;
        self.pos = 0;
        self.detoured_at = None;
        self.notes.clear();
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        if self.task.is_empty() {
            self.reset(input.task, 0);
        }
        if self.plan.is_none() {
            self.plan = Some(plan(&self.task, &input.task.instruction)?);
        }
        let step = input.history.len();
        let elements = &input.state.elements;
        let rates = if input.reflection.is_some_and(|r| !r.trim().is_empty()) {
            self.rates.scaled(REFLECTION_MISTAKE_FACTOR)
        } else {
            self.rates
        };
        let Some(intent) = self.plan.as_ref().and_then(|p| p.get(self.pos)).cloned() else {
            let a = Action::new(
                "done",
                json!({"text": "All steps of the task are done.", "success": true}),
            );
            return Ok(self.output(
                "Every part of the task has been carried out.".into(),
                "finish",
                a,
                step,
            ));
        };
        // Premature done: only once at least one step was taken and work remains.
        if step > 0 && self.roll(rates.premature_done) {
            self.notes.push(format!("premature_done@{step}"));
            let a = Action::new(
                "done",
                json!({"text": "The task is complete.", "success": true}),
            );
            return Ok(self.output("The task looks complete.".into(), "finish", a, step));
        }
        if self.detoured_at != Some(self.pos) && self.roll(rates.detour) {
            self.detoured_at = Some(self.pos);
            self.notes.push(format!("detour@{step}"));
            let a = Action::new("scroll", json!({"down": true, "pages": 0.5}));
            return Ok(self.output(
                "Let me look at the rest of the page first.".into(),
                "scroll to see more of the page",
                a,
                step,
            ));
        }
        let goal = intent.goal().to_string();
        let matcher = match &intent {
            Intent::Click(m, _) | Intent::Input(m, _, _) | Intent::Select(m, _, _) => m,
        };
        let Some(target) = matcher.resolve(elements) else {
            let a = Action::new(
                "done",
                json!({"text": format!("Could not find the element to {goal}."), "success": false}),
            );
            self.pos = self.plan_len();
            return Ok(self.output(
                format!("No element on the page lets me {goal}."),
                &goal,
                a,
                step,
            ));
        };
        self.pos += 1;
        let idx = target.index;
        let out = match intent {
            Intent::Click(m, _) => {
                let mut chosen = target;
                if self.roll(rates.misclick) {
                    // The nearest other element of the same kind, else any other element.
                    let others: Vec<&Element> =
                        elements.iter().filter(|e| e.index != idx).collect();
                    let same: Vec<&Element> = others
                        .iter()
                        .copied()
                        .filter(|e| m.kind_matches(e))
                        .collect();
                    let pool = if same.is_empty() { others } else { same };
                    if let Some(d) = pool.iter().copied().min_by_key(|e| e.index.abs_diff(idx)) {
                        chosen = d;
                        self.notes
                            .push(format!("misclick@{step}: [{}] instead of [{idx}]", d.index));
                    }
                }
                let a = Action::new("click", json!({"index": chosen.index}));
                self.output(click_thinking(&goal, chosen), &goal, a, step)
            }
            Intent::Input(_, value, _) => {
                let mut v = value.clone();
                if self.roll(rates.wrong_value) {
                    let (w, kind) = corrupt(&value, &mut self.rng);
                    self.notes
                        .push(format!("{kind}@{step}: {w:?} instead of {value:?}"));
                    v = w;
                }
                let a = Action::new("input", json!({"index": idx, "text": v, "clear": true}));
                self.output(
                    format!("To {goal}, type into element [{idx}]."),
                    &goal,
                    a,
                    step,
                )
            }
            Intent::Select(_, value, _) => {
                let mut v = value.clone();
                if self.roll(rates.wrong_value) {
                    let options: Vec<&str> = target
                        .text
                        .split(" | ")
                        .filter(|o| !o.eq_ignore_ascii_case(&value))
                        .collect();
                    if !options.is_empty() {
                        let o = options[self.rng.random_range(0..options.len())].to_string();
                        self.notes
                            .push(format!("wrong value@{step}: {o:?} instead of {value:?}"));
                        v = o;
                    }
                }
                let a = Action::new("select_dropdown", json!({"index": idx, "text": v}));
                self.output(
                    format!("To {goal}, choose it in the list [{idx}]."),
                    &goal,
                    a,
                    step,
                )
            }
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
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

    fn act(
        t: &mut ScriptedTeacher,
        task: &Task,
        elements: Vec<Element>,
        hist: usize,
    ) -> PolicyOutput {
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
            assert!(!plan(t, i).unwrap().is_empty(), "{t}");
        }
        assert_eq!(
            plan("click-checkboxes", "Select a1, b2 and click Submit.")
                .unwrap()
                .len(),
            3
        );
        assert!(plan("drag-box", "Drag it").is_err());
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
}
