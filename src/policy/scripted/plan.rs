//! Reading a task's instruction into a plan of intents (click the element with this
//! text, type this value into that field, ...), per task type, and resolving an
//! intent against the observed elements.

use crate::trajectory::Element;
use anyhow::{Result, bail};
use regex::Regex;

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

/// Which elements an intent addresses.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Matcher {
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
    pub(super) fn tags(tags: &[&'static str]) -> Matcher {
        Matcher {
            tags: tags.to_vec(),
            ..Default::default()
        }
    }
    pub(super) fn text(mut self, t: &str) -> Matcher {
        self.texts.push(t.trim().to_lowercase());
        self
    }
    pub(super) fn nth(mut self, n: usize) -> Matcher {
        self.nth = n;
        self
    }
    pub(super) fn id(mut self, id: &'static str) -> Matcher {
        self.id = Some(id);
        self
    }
    pub(super) fn kind_matches(&self, e: &Element) -> bool {
        (self.tags.is_empty() || self.tags.contains(&e.tag.as_str()))
            && (self.roles.is_empty() || self.roles.contains(&e.role.as_str()))
    }
    pub(super) fn matches(&self, e: &Element) -> bool {
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
    pub(super) fn resolve<'e>(&self, elements: &'e [Element]) -> Option<&'e Element> {
        elements.iter().filter(|e| self.matches(e)).nth(self.nth)
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Intent {
    Click(Matcher, String),
    Input(Matcher, String, String),
    Select(Matcher, String, String),
}

impl Intent {
    pub(super) fn goal(&self) -> &str {
        match self {
            Intent::Click(_, g) | Intent::Input(_, _, g) | Intent::Select(_, _, g) => g,
        }
    }
}

pub(super) fn quoted(instr: &str) -> Vec<String> {
    let re = Regex::new(r#""([^"]*)""#).expect("static regex");
    re.captures_iter(instr).map(|c| c[1].to_string()).collect()
}

pub(super) fn submit(label: &str) -> Intent {
    Intent::Click(
        Matcher::tags(&["button", "input"]).text(label),
        format!("press {label}"),
    )
}

pub(super) fn close_button() -> Matcher {
    Matcher::tags(&["button", "a", "span"])
        .text("x")
        .text("close")
        .text("×")
}

/// How a plan words the goals that would part before their label is written
/// (click-dialog-2's: `close the dialog with its x` and `click the dialog button "OK"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Goals {
    /// The teacher's own words.
    Own,
    /// The instruction's words, whichever the label: `click the button labeled "x"`.
    Echoed,
    /// The instruction's words, then what the page calls a label it does not show:
    /// `click the button labeled "x", the close button`.
    EchoedNamed,
}

/// The items of an instruction that lists the plan's parts (click-checkboxes'
/// `Select tB, nx5Zf and click Submit.`: `tB`, `nx5Zf`), in its order; `None` for a
/// task whose instruction does not list them.
pub(super) fn listed(task: &str, instr: &str) -> Option<Vec<String>> {
    if task != "click-checkboxes" {
        return None;
    }
    let re = Regex::new(r"^Select (.*) and click Submit").expect("static regex");
    let list = re.captures(instr)?[1].trim().to_string();
    Some(if list == "nothing" {
        Vec::new()
    } else {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// Turns an instruction of a supported task into a plan, its goals worded the
/// `goals` way.
// Kept whole: one arm per supported task, so the teacher's whole repertoire reads as
// one table (each arm is a few lines).
pub(super) fn plan(task: &str, instr: &str, goals: Goals) -> Result<Vec<Intent>> {
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
            let names = listed(task, instr).ok_or_else(|| {
                anyhow::anyhow!("instruction {instr:?} does not match `Select … and click Submit`")
            })?;
            let mut v: Vec<Intent> = names
                .iter()
                .map(|name| {
                    Intent::Click(
                        Matcher::tags(&["input"]).text(name),
                        format!("check {name}"),
                    )
                })
                .collect();
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
            let x = t == "x";
            let m = if x {
                close_button()
            } else {
                Matcher::tags(&["button"]).text(&t)
            };
            let goal = match goals {
                Goals::Own if x => "close the dialog with its x".to_string(),
                Goals::Own => format!("click the dialog button {t:?}"),
                Goals::EchoedNamed if x => {
                    format!("click the button labeled {t:?}, the close button")
                }
                Goals::Echoed | Goals::EchoedNamed => format!("click the button labeled {t:?}"),
            };
            vec![Intent::Click(m, goal)]
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
