//! Value renaming, the SFT trainer's data augmentation (`augment_values`).
//!
//! A web task's instruction carries instance values (a name to type, a label to
//! click) that also appear in the page's elements and in the teacher's action. A
//! small model trained on a few hundred episodes memorizes those values ("type
//! Tristine") instead of copying them from the instruction. Renaming them
//! consistently in one chat — the instruction, the element list, the history and
//! the assistant's answer — keeps the sample's meaning while changing what must be
//! copied, so only copying fits every version.
//!
//! A value is a word (a run of letters and digits, at least two characters, neither
//! all digits nor an ordinal such as "2nd") of the sample's `<task>` instruction that stands in the instructions of at
//! most [`MAX_SHARE`] of the dataset's samples (template words such as "Click",
//! "Submit" or a fixed task's "ONE" stand in many) and nowhere in the system prompt (which holds
//! the action schema's keys). Each value is replaced, as a whole word and
//! everywhere but the system prompt, by another value of the dataset or by a random
//! word of the same letter shape.

use crate::model::Message;
use rand::Rng;
use std::collections::{HashMap, HashSet};

/// The largest share of samples whose instruction a word may stand in and still be a value.
pub const MAX_SHARE: f64 = 0.02;

/// The dataset-level statistics value renaming needs.
#[derive(Debug, Clone, Default)]
pub struct ValueWords {
    /// Words that stand in too many instructions to be values.
    template: HashSet<String>,
    /// Every value word of the dataset, sorted (the pool replacements are drawn from).
    pool: Vec<String>,
}

/// The instruction of a chat: the text between `<task>` and `</task>` of its first
/// user message.
fn instruction(chat: &[Message]) -> Option<&str> {
    let user = chat.iter().find(|m| m.role == "user")?;
    let start = user.content.find("<task>")? + "<task>".len();
    let len = user.content[start..].find("</task>")?;
    Some(&user.content[start..start + len])
}

/// The words of `text`: maximal runs of alphanumeric characters.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

fn is_candidate(w: &str) -> bool {
    w.chars().count() >= 2 && !w.chars().all(|c| c.is_ascii_digit()) && !is_ordinal(w)
}

/// "1st", "22nd", "3rd", "4th": a position the page's layout gives meaning to.
fn is_ordinal(w: &str) -> bool {
    let digits = w.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && ["st", "nd", "rd", "th"].contains(&&w[digits..])
}

impl ValueWords {
    /// Counts, over the instructions of `chats` (one per sample: a task whose
    /// instruction never changes counts as often as it is trained on), how many each
    /// word stands in.
    pub fn from_chats(chats: &[Vec<Message>]) -> Self {
        let texts: Vec<&str> = chats.iter().filter_map(|c| instruction(c)).collect();
        let mut df: HashMap<&str, usize> = HashMap::new();
        for text in &texts {
            let seen: HashSet<&str> = words(text).filter(|w| is_candidate(w)).collect();
            for w in seen {
                *df.entry(w).or_default() += 1;
            }
        }
        let limit = (MAX_SHARE * texts.len() as f64).floor() as usize;
        let (mut template, mut pool) = (HashSet::new(), Vec::new());
        for (w, n) in df {
            if n > limit.max(1) {
                template.insert(w.to_string());
            } else {
                pool.push(w.to_string());
            }
        }
        pool.sort();
        ValueWords { template, pool }
    }

    /// The values of one chat, in the order they first stand in its instruction.
    pub fn values_of(&self, chat: &[Message]) -> Vec<String> {
        let Some(text) = instruction(chat) else {
            return Vec::new();
        };
        let system: HashSet<&str> = chat
            .iter()
            .filter(|m| m.role == "system")
            .flat_map(|m| words(&m.content))
            .collect();
        let mut out: Vec<String> = Vec::new();
        for w in words(text) {
            if is_candidate(w)
                && !self.template.contains(w)
                && !system.contains(w)
                && !out.iter().any(|o| o == w)
            {
                out.push(w.to_string());
            }
        }
        out
    }

    /// `chat` with its values renamed (see the module docs), or `None` when it has none.
    pub fn rename<R: Rng>(&self, chat: &[Message], rng: &mut R) -> Option<Vec<Message>> {
        let values = self.values_of(chat);
        if values.is_empty() {
            return None;
        }
        let present: HashSet<&str> = chat.iter().flat_map(|m| words(&m.content)).collect();
        let mut map: HashMap<&str, String> = HashMap::new();
        for v in &values {
            let taken: HashSet<&str> = map.values().map(String::as_str).collect();
            let fresh = (0..16)
                .map(|_| self.replacement(v, rng))
                .find(|r| r != v && !present.contains(r.as_str()) && !taken.contains(r.as_str()));
            if let Some(r) = fresh {
                map.insert(v.as_str(), r);
            }
        }
        if map.is_empty() {
            return None;
        }
        Some(
            chat.iter()
                .map(|m| {
                    if m.role == "system" {
                        m.clone()
                    } else {
                        Message::new(&m.role, replace_words(&m.content, &map))
                    }
                })
                .collect(),
        )
    }

    /// Another value of the dataset (half the time, when there is one) or a random
    /// word shaped like `v`.
    fn replacement<R: Rng>(&self, v: &str, rng: &mut R) -> String {
        if self.pool.len() > 1 && rng.random_bool(0.5) {
            return self.pool[rng.random_range(0..self.pool.len())].clone();
        }
        let shape: Vec<char> = v.chars().collect();
        let len = shape.len();
        let n = rng.random_range(len.saturating_sub(2).max(2)..=len + 2);
        (0..n)
            .map(|i| {
                let c = shape[i.min(len - 1)];
                if c.is_ascii_digit() {
                    char::from(b'0' + rng.random_range(0..10u8))
                } else if c.is_uppercase() {
                    char::from(b'A' + rng.random_range(0..26u8))
                } else {
                    char::from(b'a' + rng.random_range(0..26u8))
                }
            })
            .collect()
    }
}

/// `text` with every whole word that `map` names replaced.
fn replace_words(text: &str, map: &HashMap<&str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word_start: Option<usize> = None;
    let flush = |out: &mut String, w: &str| match map.get(w) {
        Some(r) => out.push_str(r),
        None => out.push_str(w),
    };
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            word_start.get_or_insert(i);
        } else {
            if let Some(s) = word_start.take() {
                flush(&mut out, &text[s..i]);
            }
            out.push(c);
        }
    }
    if let Some(s) = word_start {
        flush(&mut out, &text[s..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn chat(task: &str, elements: &str, answer: &str) -> Vec<Message> {
        vec![
            Message::new(
                "system",
                "Answer with JSON: {\"action\": [{\"input\": {\"index\": 1, \"text\": \"...\"}}]}",
            ),
            Message::new(
                "user",
                format!("<task>\n{task}\n</task>\n<browser_state>\n{elements}</browser_state>\n"),
            ),
            Message::new("assistant", answer),
        ]
    }

    /// Fifty enter-text chats with distinct names and one shared template.
    fn corpus() -> Vec<Vec<Message>> {
        (0..50)
            .map(|i| {
                let name = format!("Name{}x", char::from(b'a' + (i % 26) as u8)).repeat(1 + i / 26);
                chat(
                    &format!("Enter \"{name}\" into the text field and press Submit."),
                    "[1]<input type=text />\n[2]<button>Submit</button>\n",
                    &format!("{{\"memory\": \"typing {name}\", \"action\": [{{\"input\": {{\"index\": 1, \"text\": \"{name}\"}}}}]}}"),
                )
            })
            .collect()
    }

    #[test]
    fn instance_values_are_renamed_everywhere_and_template_words_are_kept() {
        let chats = corpus();
        let vw = ValueWords::from_chats(&chats);
        assert_eq!(vw.values_of(&chats[3]), vec!["Namedx".to_string()]);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let out = vw.rename(&chats[3], &mut rng).unwrap();
        assert_eq!(out[0], chats[3][0], "the system prompt is never changed");
        let user = &out[1].content;
        let answer = &out[2].content;
        assert!(!user.contains("Namedx") && !answer.contains("Namedx"));
        // The new value is typed exactly as the new instruction says.
        let typed: serde_json::Value = serde_json::from_str(answer).unwrap();
        let new = typed["action"][0]["input"]["text"].as_str().unwrap();
        assert!(user.contains(&format!("Enter \"{new}\" into")), "{user}");
        assert_eq!(typed["memory"], format!("typing {new}"));
        // Template words, keys and indices are untouched.
        assert!(user.contains("press Submit") && user.contains("<button>Submit</button>"));
        assert!(user.contains("[1]<input type=text />"));
    }

    #[test]
    fn renaming_is_seeded_and_varies_between_draws() {
        let chats = corpus();
        let vw = ValueWords::from_chats(&chats);
        let draw = |seed| {
            vw.rename(&chats[0], &mut ChaCha8Rng::seed_from_u64(seed))
                .unwrap()
        };
        assert_eq!(draw(1), draw(1));
        let distinct: HashSet<String> = (0..20).map(|s| draw(s)[2].content.clone()).collect();
        assert!(distinct.len() > 10, "{distinct:?}");
    }

    #[test]
    fn digits_are_kept_and_a_chat_without_a_task_is_left_alone() {
        let mut chats = corpus();
        chats.push(chat(
            "Click on Tab #2.",
            "[1]<a>Tab #2</a>\n",
            "{\"action\": []}",
        ));
        let vw = ValueWords::from_chats(&chats);
        // In this corpus "Tab" stands in one instruction of 51: a value; "2" is digits.
        let out = vw
            .rename(chats.last().unwrap(), &mut ChaCha8Rng::seed_from_u64(3))
            .unwrap();
        let user = &out[1].content;
        assert!(!user.contains("Tab"), "{user}");
        let new = user.split("<a>").nth(1).unwrap().split(' ').next().unwrap();
        assert!(user.contains(&format!(" {new} #2.\n")), "{user}");
        // Ordinals keep their meaning.
        let focus = chat("Focus into the 2nd input textbox.", "[1]<input />\n", "{}");
        assert!(!vw.values_of(&focus).contains(&"2nd".to_string()));
        // No <task> block: nothing to rename.
        let bare = vec![Message::new("user", "hello Namedx")];
        assert!(
            vw.rename(&bare, &mut ChaCha8Rng::seed_from_u64(3))
                .is_none()
        );
    }

    #[test]
    fn words_inside_longer_words_are_not_touched() {
        let map = HashMap::from([("ab", "XY".to_string())]);
        assert_eq!(replace_words("ab abc cab ab.", &map), "XY abc cab XY.");
        assert_eq!(replace_words("", &map), "");
        assert_eq!(replace_words("é ab", &map), "é XY");
    }
}
