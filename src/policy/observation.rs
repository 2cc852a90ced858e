//! Parts of the observation beyond the element list, shared by the prompt formats:
//! the page text outside elements (fitted to a token budget), the tab list and the
//! scroll position. Each is rendered only when the state has it.

use super::task_words::words;
use super::token_count::TokenCounter;
use crate::trajectory::State;
use crate::util::sanitize::clean_line;

/// Share of the element budget that page text may take when both do not fit.
pub const PAGE_TEXT_SHARE: f64 = 0.25;

/// The tab lines, `[id] url - title`, the current tab marked; empty without tabs.
pub fn tab_lines(state: &State) -> String {
    let mut out = String::new();
    for t in &state.tabs {
        let current = if !state.current_tab.is_empty() && t.id == state.current_tab {
            " (current)"
        } else {
            ""
        };
        out.push_str(&format!(
            "[{}] {} - {}{current}\n",
            clean_line(&t.id),
            clean_line(&t.url),
            clean_line(&t.title)
        ));
    }
    out
}

/// `1.0 pages above, 0.5 pages below`, when the scroll position is known.
pub fn scroll_text(state: &State) -> Option<String> {
    state.scroll.map(|s| {
        format!(
            "{:.1} pages above, {:.1} pages below",
            s.pages_above, s.pages_below
        )
    })
}

/// The page text within `budget` tokens. When it does not all fit, the lines that
/// share words with the task are kept first (most shared words first), then the
/// others from the top of the page, and each gap says how many lines it hides —
/// so a line the task is about (`W-132 is red.`) survives a long page.
pub fn fit_page_text(
    text: &str,
    instruction: &str,
    budget: usize,
    counter: &dyn TokenCounter,
) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| clean_line(l.trim()).into_owned())
        .filter(|l| !l.is_empty())
        .collect();
    let costs: Vec<usize> = lines.iter().map(|l| counter.count(l) + 1).collect();
    if costs.iter().sum::<usize>() <= budget {
        return lines.join("\n");
    }
    let budget = budget.saturating_sub((budget / 10).max(8));
    let task = words(instruction);
    let mut order: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (i, words(l).intersection(&task).count()))
        .collect();
    order.sort_by_key(|&(i, r)| (std::cmp::Reverse(r), i));
    let mut kept = vec![false; lines.len()];
    let mut used = 0;
    for (i, _) in order {
        if used + costs[i] <= budget {
            kept[i] = true;
            used += costs[i];
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut hidden = 0;
    for (i, line) in lines.into_iter().enumerate() {
        if kept[i] {
            if hidden > 0 {
                out.push(format!("… {hidden} lines omitted …"));
                hidden = 0;
            }
            out.push(line);
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        out.push(format!("… {hidden} lines omitted …"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::token_count::CharApprox;
    use crate::trajectory::{Scroll, Tab};

    #[test]
    fn a_long_page_keeps_the_line_the_task_is_about() {
        let mut text: Vec<String> = (0..200)
            .map(|i| format!("Newsletter issue {i}: notes on tools"))
            .collect();
        text.insert(150, "W-132 is red.".into());
        let fitted = fit_page_text(&text.join("\n"), "colour of part W-132", 200, &CharApprox);
        assert!(fitted.contains("W-132 is red."), "{fitted}");
        assert!(fitted.contains("lines omitted"));
        assert!(
            CharApprox.count(&fitted) <= 200,
            "{}",
            CharApprox.count(&fitted)
        );
        assert_eq!(fit_page_text("a\n\nb", "x", 100, &CharApprox), "a\nb");
    }

    #[test]
    fn tabs_and_scroll_render_only_when_known() {
        let mut s = State::default();
        assert!(tab_lines(&s).is_empty() && scroll_text(&s).is_none());
        s.tabs = vec![
            Tab {
                id: "5BA7".into(),
                url: "http://a.test/".into(),
                title: "A".into(),
            },
            Tab {
                id: "7290".into(),
                url: "http://a.test/terms".into(),
                title: "Terms".into(),
            },
        ];
        s.current_tab = "7290".into();
        s.scroll = Some(Scroll {
            pages_above: 1.0,
            pages_below: 0.25,
        });
        assert_eq!(
            tab_lines(&s),
            "[5BA7] http://a.test/ - A\n[7290] http://a.test/terms - Terms (current)\n"
        );
        assert_eq!(scroll_text(&s).unwrap(), "1.0 pages above, 0.2 pages below");
    }
}
