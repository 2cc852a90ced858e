//! Drawing the Reward view: the state list, the rollout group (when rollouts are
//! open), and the selected state with the candidate and its live rubric decision.

use super::{Item, RewardView, Source};
use crate::reward::{Level, score};
use crate::runs::rollouts::{RolloutGroup, RolloutSample};
use crate::trajectory::Element;
use crate::tui::components::pane;
use crate::tui::components::step_view::{action_json, element_window};
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use crate::util::sanitize::clean_text;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

impl RewardView {
    pub(super) fn draw_view(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        let [left, right] =
            Layout::horizontal([Constraint::Length(44), Constraint::Min(40)]).areas(area);
        self.draw_states(f, left, sh, &th);

        let mut right = right;
        let mut recorded = None;
        // The selected rollout group, parsed once for this frame.
        let sel = match self.source {
            Source::Rollouts => self.group(self.list.selected),
            _ => None,
        };
        let sel_ok = sel.as_ref().and_then(|r| r.as_ref().ok());
        if self.source == Source::Rollouts {
            if let Some(g) = sel_ok {
                self.prefill(g);
            }
            let samples = sel_ok.map_or(0, |g| g.samples.len());
            let h = (samples as u16 + 3).min(right.height / 2).max(3);
            let [top, rest] =
                Layout::vertical([Constraint::Length(h), Constraint::Min(3)]).areas(right);
            let b = pane("Group · h/l sample · recorded reward and rule", false, &th);
            let gi = b.inner(top);
            f.render_widget(b, top);
            let lines = self.group_lines(sel.as_ref(), &th, gi.width as usize);
            // Keep the selected sample in view.
            let skip = (self.sample + 2).saturating_sub(gi.height as usize);
            f.render_widget(Paragraph::new(lines).scroll((skip as u16, 0)), gi);
            right = rest;
            recorded = sel_ok.and_then(|g| Some(g.samples[self.sample_of(g)?].clone()));
        }
        let Some(item) = self.item(sh, self.list.selected, sel_ok) else {
            let msg = match sel_ok {
                Some(g) => format!(
                    "prompt `{}` is not a mined pair of this dataset (a full-corpus prompt, or a run on another dataset): only the recorded decisions are shown",
                    line(&g.prompt_id)
                ),
                None => String::new(),
            };
            f.render_widget(
                Paragraph::new(Span::styled(msg, th.dim()))
                    .wrap(Wrap { trim: false })
                    .block(pane("State", false, &th)),
                right,
            );
            return;
        };
        self.draw_item(f, right, sh, item, recorded.as_ref());
    }

    /// The left pane: the states of the current source, the selected one marked.
    fn draw_states(&mut self, f: &mut Frame, area: Rect, sh: &mut Shared, th: &Theme) {
        let title = match self.source {
            Source::Pairs => "States: mined pairs (t: trajectory)".to_string(),
            Source::Trajectory if self.rollouts.is_some() => {
                "States: trajectory steps (t: rollouts)".to_string()
            }
            Source::Trajectory => "States: trajectory steps (t: pairs)".to_string(),
            Source::Rollouts => format!(
                "Rollouts: {} (t: pairs)",
                self.rollouts
                    .as_ref()
                    .and_then(|r| r.run_dir().file_name())
                    .map(|n| line(&n.to_string_lossy()))
                    .unwrap_or_default()
            ),
        };
        let block = pane(title, !self.editing, th);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let n = self.len(sh);
        let window = self.list.window_in(n, inner);
        let mut rows = Vec::new();
        for i in window {
            let text = trunc(&self.label(sh, i), inner.width as usize);
            rows.push(Line::from(Span::styled(
                text,
                if i == self.list.selected {
                    th.selected()
                } else {
                    th.text()
                },
            )));
        }
        if rows.is_empty() {
            rows.push(Line::from(Span::styled("(no states)", th.dim())));
        }
        f.render_widget(Paragraph::new(rows), inner);
    }

    /// The selected state: URL, title and target; the candidate editor; the rubric's
    /// decision on the candidate (beside the recorded one for a rollout); the
    /// elements around the target.
    fn draw_item(
        &mut self,
        f: &mut Frame,
        area: Rect,
        sh: &Shared,
        item: Item,
        recorded: Option<&RolloutSample>,
    ) {
        let th = &sh.theme;
        let [info, cand, verdict, elems] = Layout::vertical([
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(if recorded.is_some() { 8 } else { 6 }),
            Constraint::Min(3),
        ])
        .areas(area);
        let (url, title_text, elements) = match &item.state {
            Ok(s) => (s.url.clone(), s.title.clone(), s.elements.clone()),
            Err(e) => (String::new(), format!("state unavailable: {e}"), Vec::new()),
        };
        let mut info_lines = vec![
            Line::from(vec![
                Span::styled("URL: ", th.label()),
                Span::styled(line(&url), th.text()),
            ]),
            Line::from(vec![
                Span::styled("Title: ", th.label()),
                Span::styled(line(&title_text), th.text()),
            ]),
            Line::from(vec![
                Span::styled("Target: ", th.label()),
                Span::styled(line(&item.target.short()), th.good()),
            ]),
        ];
        info_lines.extend(action_json(&item.target, th));
        f.render_widget(
            Paragraph::new(info_lines).block(pane(item.label.clone(), false, th)),
            info,
        );

        self.candidate.set_block(pane(
            "Candidate · e types · Esc stops · Ctrl-U clears",
            self.editing,
            th,
        ));
        self.candidate.set_style(th.text());
        f.render_widget(&self.candidate, cand);

        let text = self.candidate.lines().join("\n");
        f.render_widget(
            Paragraph::new(verdict_lines(&text, &item, &elements, recorded, sh))
                .wrap(Wrap { trim: false })
                .block(pane("Rubric decision", false, th)),
            verdict,
        );
        let state = item.state.unwrap_or_default();
        let b = pane("Elements", false, th);
        let ei = b.inner(elems);
        f.render_widget(b, elems);
        f.render_widget(
            Paragraph::new(element_window(
                &state,
                item.target.target_index(),
                th,
                ei.width as usize,
                ei.height as usize,
            )),
            ei,
        );
    }

    /// The group pane: the group's gate and routing, then every sample with its
    /// recorded reward and rule (the selected one marked).
    fn group_lines(
        &self,
        sel: Option<&Result<RolloutGroup, String>>,
        th: &Theme,
        width: usize,
    ) -> Vec<Line<'static>> {
        let g = match sel {
            None => return vec![Line::from(Span::styled("(no group)", th.dim()))],
            Some(Ok(g)) => g,
            Some(Err(e)) => return vec![Line::from(Span::styled(trunc(e, width), th.bad()))],
        };
        let (mean, std) = g.reward_stats();
        let best = g.samples.iter().map(|s| s.reward).fold(f64::NAN, f64::max);
        let mut out = vec![Line::from(vec![
            Span::styled("gate ", th.label()),
            Span::styled(line(&g.gate), th.text()),
            Span::styled("  routed ", th.label()),
            Span::styled(line(g.routed.as_deref().unwrap_or("-")), th.text()),
            Span::styled(
                format!(
                    "  mean {mean:.2} σ {std:.2} best {best:.2}  step {}",
                    g.step
                ),
                th.dim(),
            ),
        ])];
        let k = self.sample.min(g.samples.len().saturating_sub(1));
        for (i, smp) in g.samples.iter().enumerate() {
            let style = if i == k {
                th.selected()
            } else if smp.reward >= 0.7 {
                th.good()
            } else if smp.reward > 0.0 {
                th.warn()
            } else {
                th.bad()
            };
            let text = format!(
                "{} #{i} {:.2} {:<24} {}",
                if i == k { "▶" } else { " " },
                smp.reward,
                trunc(&smp.rule, 24),
                line(&smp.text)
            );
            out.push(Line::from(Span::styled(trunc(&text, width), style)));
        }
        out
    }
}

/// The rubric's decision on the typed candidate: score, level, rule and reason, and
/// for a rollout the recorded decision first, marked where the two differ.
fn verdict_lines(
    text: &str,
    item: &Item,
    elements: &[Element],
    recorded: Option<&RolloutSample>,
    sh: &Shared,
) -> Vec<Line<'static>> {
    let th = &sh.theme;
    if text.trim().is_empty() {
        return vec![Line::from(Span::styled(
            "type a candidate to score it",
            th.dim(),
        ))];
    }
    let d = score(text, &item.target, elements, &sh.reward_cfg);
    let style = match d.level {
        Level::Exact | Level::Core => th.good(),
        Level::Type => th.warn(),
        Level::Wrong => th.bad(),
    };
    let mut v = vec![
        Line::from(vec![
            Span::styled("Score: ", th.label()),
            Span::styled(format!("{:.2}", d.score), style),
        ]),
        Line::from(vec![
            Span::styled("Level: ", th.label()),
            Span::styled(format!("{:?}", d.level).to_lowercase(), style),
        ]),
        Line::from(vec![
            Span::styled("Rule: ", th.label()),
            Span::styled(line(&d.rule), th.text()),
        ]),
        Line::from(vec![
            Span::styled("Reason: ", th.label()),
            Span::styled(line(&d.reason), th.text()),
        ]),
    ];
    if let Some(rec) = recorded {
        let same_text = clean_text(&rec.text) == text;
        let agrees = (rec.reward - d.score).abs() < 1e-9 && rec.rule == d.rule;
        let mut spans = vec![
            Span::styled("Recorded: ", th.label()),
            Span::styled(format!("{:.2} {}", rec.reward, line(&rec.rule)), th.text()),
        ];
        if !same_text {
            spans.push(Span::styled("  (candidate edited)", th.dim()));
        } else if !agrees {
            spans.push(Span::styled(
                "  ≠ live decision (rubric or config changed since the run)",
                th.warn(),
            ));
        }
        v.insert(0, Line::from(spans));
    }
    v
}
