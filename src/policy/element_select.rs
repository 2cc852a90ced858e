//! Which elements a prompt shows, and each one's line. A page's element list is
//! fitted to a token budget by keeping what matters: elements whose text overlaps
//! the task, then elements nearest (in page order) to the element acted on in the
//! previous step, dropping from the far end.

use super::task_words::words;
use super::token_count::TokenCounter;
use crate::action::Action;
use crate::env::observe::element_line;
use crate::trajectory::{Element, Step};
use std::collections::BTreeSet;

/// One element's line: [`element_line`], and with `echo` its index once more after
/// its text (`[5]<button />OK [5]`).
pub fn prompt_line(e: &Element, echo: bool) -> String {
    let line = element_line(e);
    if echo {
        format!("{line} [{}]", e.index)
    } else {
        line
    }
}

/// How much an element's text and attributes overlap the task words.
fn relevance(e: &Element, task: &BTreeSet<String>) -> usize {
    let mut text = e.text.clone();
    for (k, v) in &e.attrs {
        if matches!(
            k.as_str(),
            "id" | "name" | "placeholder" | "aria-label" | "title" | "value"
        ) {
            text.push(' ');
            text.push_str(v);
        }
    }
    words(&text).intersection(task).count()
}

/// Position in `elements` of the element the previous step acted on, if any.
fn anchor_position(elements: &[Element], history: &[Step]) -> Option<usize> {
    let last = history.last()?;
    let idx = last
        .output
        .actions
        .iter()
        .rev()
        .find_map(Action::target_index)?;
    elements.iter().position(|e| i64::from(e.index) == idx)
}

/// Chooses which elements to show within `budget` tokens: relevant ones first (most
/// overlap first), then by distance from the anchor, dropping the farthest.
/// Returns positions in `elements`, sorted. `echo`: the lines end with their index
/// again ([`prompt_line`]).
pub fn select_elements(
    elements: &[Element],
    instruction: &str,
    history: &[Step],
    budget: usize,
    counter: &dyn TokenCounter,
    echo: bool,
) -> Vec<usize> {
    let costs: Vec<usize> = elements
        .iter()
        .map(|e| counter.count(&prompt_line(e, echo)) + 1)
        .collect();
    if costs.iter().sum::<usize>() <= budget {
        return (0..elements.len()).collect();
    }
    // Room for the "… N elements omitted …" markers.
    let budget = budget.saturating_sub((budget / 10).max(16));
    let task = words(instruction);
    let anchor = anchor_position(elements, history).unwrap_or(0);
    let dist = |p: usize| p.abs_diff(anchor);
    let mut relevant: Vec<(usize, usize)> = elements
        .iter()
        .enumerate()
        .map(|(p, e)| (p, relevance(e, &task)))
        .filter(|(_, r)| *r > 0)
        .collect();
    relevant.sort_by_key(|&(p, r)| (std::cmp::Reverse(r), dist(p), p));
    let mut kept = vec![false; elements.len()];
    let mut used = 0;
    for (p, _) in relevant {
        if used + costs[p] <= budget {
            kept[p] = true;
            used += costs[p];
        }
    }
    // Nearest to the anchor first; on ties the element further down the page.
    let mut by_distance: Vec<usize> = (0..elements.len()).collect();
    by_distance.sort_by_key(|&p| (dist(p), p < anchor));
    for p in by_distance {
        if kept[p] {
            continue;
        }
        if used + costs[p] > budget {
            break;
        }
        kept[p] = true;
        used += costs[p];
    }
    (0..elements.len()).filter(|&p| kept[p]).collect()
}
