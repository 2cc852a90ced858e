//! The words of a task instruction that matter for choosing what a prompt shows.

use std::collections::BTreeSet;

/// Lower-case words of at least two characters, without a few stop words.
pub fn words(text: &str) -> BTreeSet<String> {
    const STOP: &[&str] = &[
        "the", "and", "a", "an", "to", "of", "on", "in", "into", "for", "then", "click", "select",
        "enter", "press", "button", "field", "text", "from", "with", "is", "it", "by", "or", "be",
    ];
    text.split(|c: char| !c.is_alphanumeric() && c != '#')
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOP.contains(&w.as_str()))
        .collect()
}
