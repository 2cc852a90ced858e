//! Drawing the Mined pairs tab: the queue, the pair's two sides with the rubric's
//! decision, and the popups.

use super::edit::EditBox;
use super::view::{PairsView, Popup};
use crate::action::Action as BrowserAction;
use crate::annotate::{Op, PairState, Status};
use crate::mine::pair::{DEFAULT_TAXONOMY, LabelSource, MinedPair, StepRef};
use crate::reward::{Decision, score_action};
use crate::trajectory::{Element, Step};
use crate::tui::components::pane;
use crate::tui::components::step_view::element_window;
use crate::tui::shared::Shared;
use crate::tui::theme::Theme;
use crate::tui::widgets::text::{line, trunc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

pub(super) fn status_icon(s: Status) -> &'static str {
    match s {
        Status::Pending => "·",
        Status::Accepted => "✓",
        Status::Rejected => "✗",
        Status::Edited => "✎",
        Status::Conflict => "≠",
    }
}

/// The step a pair side points at, loaded through the cache.
pub(super) fn side_step(sh: &mut Shared, r: &StepRef) -> Result<Step, String> {
    let t = sh.trajectories.by_id(&sh.dataset, &r.trajectory)?;
    t.steps
        .iter()
        .find(|s| s.index == r.step)
        .or_else(|| t.steps.get(r.step as usize))
        .cloned()
        .ok_or_else(|| format!("trajectory {} has no step {}", line(&r.trajectory), r.step))
}

fn decision_line(label: &str, d: &Decision, th: &Theme) -> Line<'static> {
    let style = match d.level {
        crate::reward::Level::Exact | crate::reward::Level::Core => th.good(),
        crate::reward::Level::Type => th.warn(),
        crate::reward::Level::Wrong => th.bad(),
    };
    Line::from(vec![
        Span::styled(format!("{label}: "), th.label()),
        Span::styled(
            format!("{:.1} {:?}", d.score, d.level).to_lowercase(),
            style,
        ),
        Span::styled(format!("  {}", line(&d.rule)), th.text()),
        Span::styled(format!(" — {}", line(&d.reason)), th.dim()),
    ])
}

impl PairsView {
    /// The review queue: status, id, category, confidence and score per pair.
    pub(super) fn draw_queue(&mut self, f: &mut Frame, left: Rect, sh: &mut Shared) {
        let th = sh.theme.clone();
        let (done, total) = sh.reviewed();
        let stays = if self.stay {
            " · stays after a decision"
        } else {
            ""
        };
        let block = pane(format!("Queue {done}/{total} reviewed{stays}"), true, &th);
        let inner = block.inner(left);
        f.render_widget(block, left);
        let window = self.list.window_in(self.rows.len(), inner);
        let mut lines = Vec::new();
        for pos in window {
            let p = &sh.pairs[self.rows[pos]];
            let st = sh.folded.state(&p.id);
            let cat = st.category.as_deref().unwrap_or(&p.failure_mode.category);
            let text = format!(
                "{} {:<14} {:<18} {:.2} {:.2}",
                status_icon(st.status),
                trunc(&p.id, 14),
                trunc(cat, 18),
                if st.category.is_some() {
                    1.0
                } else {
                    p.failure_mode.confidence
                },
                p.scores.total
            );
            let style = if pos == self.list.selected {
                th.selected()
            } else {
                match st.status {
                    Status::Pending => th.text(),
                    Status::Accepted | Status::Edited => th.good(),
                    Status::Rejected => th.bad(),
                    Status::Conflict => th.warn(),
                }
            };
            lines.push(Line::from(Span::styled(
                trunc(&text, inner.width as usize),
                style,
            )));
        }
        if lines.is_empty() {
            let msg = if !sh.pairs_loaded {
                "loading mined pairs…"
            } else if !self.filter.is_empty() {
                "(no match)"
            } else {
                "(no mined pairs: run `rmsweb mine`)"
            };
            lines.push(Line::from(Span::styled(msg, th.dim())));
        }
        f.render_widget(Paragraph::new(lines), inner);
    }

    fn draw_side(
        &self,
        f: &mut Frame,
        area: Rect,
        sh: &mut Shared,
        title: &str,
        r: &StepRef,
        action: &BrowserAction,
    ) {
        let th = sh.theme.clone();
        let block = pane(
            format!("{title} · {} step {}", trunc(&r.trajectory, 24), r.step),
            false,
            &th,
        );
        let inner = block.inner(area);
        f.render_widget(block, area);
        match side_step(sh, r) {
            Ok(step) => {
                let shot_h = (inner.height / 2).clamp(2, 10).min(inner.height);
                let [shot, text] =
                    Layout::vertical([Constraint::Length(shot_h), Constraint::Min(0)]).areas(inner);
                // The side's action drawn where it acts: the target on the success,
                // the failing action on the failure.
                sh.images.draw_marked(
                    f,
                    shot,
                    sh.dataset.root(),
                    step.state.screenshot.as_deref(),
                    crate::trajectory::mark::action_mark(&step.state, action),
                    th.dim(),
                );
                let w = text.width as usize;
                let mut lines = vec![
                    Line::from(vec![
                        Span::styled("URL ", th.label()),
                        Span::styled(trunc(&step.state.url, w.saturating_sub(4)), th.text()),
                    ]),
                    Line::from(vec![
                        Span::styled("Title ", th.label()),
                        Span::styled(trunc(&step.state.title, w.saturating_sub(6)), th.text()),
                    ]),
                    Line::from(vec![
                        Span::styled("Action ", th.label()),
                        Span::styled(trunc(&action.short(), w.saturating_sub(7)), th.warn()),
                    ]),
                ];
                let room = (text.height as usize).saturating_sub(lines.len());
                lines.extend(element_window(
                    &step.state,
                    action.target_index(),
                    &th,
                    w,
                    room,
                ));
                f.render_widget(Paragraph::new(lines), text);
            }
            Err(e) => f.render_widget(
                Paragraph::new(line(&e))
                    .style(th.bad())
                    .wrap(Wrap { trim: false }),
                inner,
            ),
        }
    }

    pub(super) fn draw_detail(
        &mut self,
        f: &mut Frame,
        area: Rect,
        sh: &mut Shared,
        pair: &MinedPair,
    ) {
        let th = sh.theme.clone();
        let st = sh.folded.state(&pair.id);
        let [head, sides, bottom] = Layout::vertical([
            Constraint::Length(5),
            Constraint::Percentage(55),
            Constraint::Min(6),
        ])
        .areas(area);
        let instruction = sh
            .tasks
            .get(&pair.task_id)
            .map(|t| t.instruction.clone())
            .unwrap_or_default();
        let kind = match pair.kind {
            crate::mine::pair::PairKind::FailContrast => "fail_contrast",
            crate::mine::pair::PairKind::Detour => "detour",
        };
        f.render_widget(
            Paragraph::new(head_lines(pair, &st, &instruction, &th)).block(pane(
                format!("{} · {kind} · {}", trunc(&pair.id, 30), line(&pair.domain)),
                false,
                &th,
            )),
            head,
        );
        let [s_left, s_right] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(sides);
        let target = st
            .target
            .clone()
            .unwrap_or_else(|| pair.target_action.clone());
        self.draw_side(f, s_left, sh, "Success", &pair.success, &target);
        self.draw_side(f, s_right, sh, "Loc", &pair.loc, &pair.loc_action);

        let elements: Vec<Element> = side_step(sh, &pair.success)
            .map(|s| s.state.elements)
            .unwrap_or_default();
        let decision = score_action(&pair.loc_action, &target, &elements, &sh.reward_cfg);
        let p = Paragraph::new(decision_lines(pair, &st, &target, &decision, &th))
            .wrap(Wrap { trim: false })
            .scroll((self.detail_scroll, 0))
            .block(pane(
                "Decision · a accept · x reject · l relabel · e edit · n note · u undo · ] next",
                false,
                &th,
            ));
        f.render_widget(p, bottom);
    }

    pub(super) fn draw_popup(
        &mut self,
        f: &mut Frame,
        area: Rect,
        sh: &mut Shared,
        pair: &MinedPair,
    ) {
        let th = sh.theme.clone();
        let centered = |w: u16, h: u16| crate::tui::components::centered(area, w, h);
        match &mut self.popup {
            Popup::None => {}
            Popup::Agreement(view) => view.draw(f, area, &th),
            Popup::Settle => {
                let lines = settle_lines(&sh.folded.state(&pair.id), &th);
                let r = centered(44, lines.len() as u16 + 2);
                f.render_widget(Clear, r);
                f.render_widget(
                    Paragraph::new(lines).block(pane("Settle the conflict", true, &th)),
                    r,
                );
            }
            Popup::Relabel => {
                let r = centered(44, DEFAULT_TAXONOMY.len() as u16 + 2);
                f.render_widget(Clear, r);
                let lines: Vec<Line> = DEFAULT_TAXONOMY
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        Line::from(vec![
                            Span::styled(format!(" {} ", i + 1), th.label()),
                            Span::styled(*c, th.text()),
                        ])
                    })
                    .collect();
                f.render_widget(
                    Paragraph::new(lines).block(pane(
                        "Relabel: press 1-8 (Esc cancels)",
                        true,
                        &th,
                    )),
                    r,
                );
            }
            Popup::Edit(b) => {
                let r = centered(area.width.saturating_sub(8), 12);
                f.render_widget(Clear, r);
                let block = pane(
                    "Edit target action · Enter saves if valid · Esc cancels · Ctrl-U clears",
                    true,
                    &th,
                );
                let inner = block.inner(r);
                f.render_widget(block, r);
                let [edit, info] =
                    Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(inner);
                b.area.set_style(th.text());
                f.render_widget(&b.area, edit);
                let info_lines = edit_info_lines(b, pair, sh, &th);
                f.render_widget(Paragraph::new(info_lines), info);
            }
            Popup::Note(a) => {
                let r = centered(70, 6);
                f.render_widget(Clear, r);
                let block = pane("Note · Enter saves · Esc cancels", true, &th);
                let inner = block.inner(r);
                f.render_widget(block, r);
                a.set_style(th.text());
                f.render_widget(&**a, inner);
            }
        }
    }
}

/// `alice: accept · bob: reject`, each annotator's standing decision.
fn decisions_text(st: &crate::annotate::PairState) -> String {
    st.decisions
        .iter()
        .map(|(who, op)| format!("{}: {}", line(who), op.as_str()))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn mark(b: bool) -> &'static str {
    if b { "✓" } else { "✗" }
}

/// The detail's head: the task, the pair's status (who decided or settled it) and its
/// category (the annotator's when relabelled, else the miner's with its source).
fn head_lines(
    pair: &MinedPair,
    st: &PairState,
    instruction: &str,
    th: &Theme,
) -> Vec<Line<'static>> {
    let (cat, src, conf) = match &st.category {
        Some(c) => (c.clone(), "annotator".to_string(), 1.0),
        None => (
            pair.failure_mode.category.clone(),
            match pair.failure_mode.source {
                LabelSource::Judge => "judge",
                LabelSource::Heuristic => "heuristic",
                LabelSource::Annotator => "annotator",
            }
            .to_string(),
            pair.failure_mode.confidence,
        ),
    };
    let status_style = match st.status {
        Status::Pending | Status::Conflict => th.warn(),
        Status::Accepted | Status::Edited => th.good(),
        Status::Rejected => th.bad(),
    };
    let who = match (&st.settled, st.status) {
        (Some((by, op)), _) => format!(" (settled by {}: {})", line(by), op.as_str()),
        (None, Status::Conflict) => format!(" ({} · S settles)", decisions_text(st)),
        _ => st
            .last_annotator
            .as_ref()
            .map(|a| format!(" (by {})", line(a)))
            .unwrap_or_default(),
    };
    vec![
        Line::from(vec![
            Span::styled("Task: ", th.label()),
            Span::styled(line(instruction), th.text()),
        ]),
        Line::from(vec![
            Span::styled("Status: ", th.label()),
            Span::styled(st.status.as_str(), status_style),
            Span::styled(who, th.dim()),
        ]),
        Line::from(vec![
            Span::styled("Category: ", th.label()),
            Span::styled(line(&cat), th.text()),
            Span::styled(format!(" ({src}, {conf:.2})"), th.dim()),
        ]),
    ]
}

/// The decision pane: target (edited or mined) against the loc action, the rubric's
/// decision on them, the mining scores and gates, the evidence and the notes.
fn decision_lines(
    pair: &MinedPair,
    st: &PairState,
    target: &BrowserAction,
    decision: &Decision,
    th: &Theme,
) -> Vec<Line<'static>> {
    let sc = &pair.scores;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("Target: ", th.label()),
            Span::styled(line(&target.short()), th.good()),
            Span::styled(
                if st.target.is_some() {
                    format!("  (edited; mined: {})", line(&pair.target_action.short()))
                } else {
                    String::new()
                },
                th.dim(),
            ),
            Span::styled("   Loc: ", th.label()),
            Span::styled(line(&pair.loc_action.short()), th.bad()),
        ]),
        decision_line("Rubric (loc vs target)", decision, th),
        Line::from(vec![
            Span::styled("Alignment: ", th.label()),
            Span::styled(
                format!(
                    "url {:.2} · dom {:.2} · memory {:.2} · progress {:.2} → {:.2}   contrast {:.2} · evidence {:.2} · total {:.2}",
                    sc.url,
                    sc.dom,
                    sc.memory,
                    sc.progress,
                    sc.alignment,
                    sc.contrast,
                    sc.evidence,
                    sc.total
                ),
                th.text(),
            ),
        ]),
        Line::from(vec![
            Span::styled("Gates: ", th.label()),
            Span::styled(
                format!(
                    "validity {} · visual {} · progress {}",
                    mark(pair.gates.validity),
                    mark(pair.gates.visual),
                    mark(pair.gates.progress)
                ),
                th.text(),
            ),
        ]),
        Line::from(Span::styled("Evidence:", th.label())),
    ];
    for e in &pair.evidence {
        lines.push(Line::from(Span::styled(
            format!("  • {}", line(e)),
            th.text(),
        )));
    }
    if !st.notes.is_empty() {
        lines.push(Line::from(Span::styled("Notes:", th.label())));
        for n in &st.notes {
            lines.push(Line::from(Span::styled(
                format!("  ✎ {}", line(n)),
                th.text(),
            )));
        }
    }
    lines
}

/// The conflict's decisions, one line per annotator, and the keys that settle it.
fn settle_lines(st: &PairState, th: &Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = st
        .decisions
        .iter()
        .map(|(who, op)| {
            Line::from(vec![
                Span::styled(format!(" {:<16}", trunc(&line(who), 16)), th.label()),
                Span::styled(
                    op.as_str(),
                    if *op == Op::Reject {
                        th.bad()
                    } else {
                        th.good()
                    },
                ),
            ])
        })
        .collect();
    lines.push(Line::from(Span::styled(
        " a accept · x reject · Esc cancels",
        th.dim(),
    )));
    lines
}

/// Under the target editor: the edited action if it parses (with the rubric's view of
/// it against the mined target and of the loc action against it), else why not.
fn edit_info_lines(b: &EditBox, pair: &MinedPair, sh: &Shared, th: &Theme) -> Vec<Line<'static>> {
    match &b.parsed {
        Ok(a) => {
            let vs_mined = score_action(a, &pair.target_action, &b.elements, &sh.reward_cfg);
            let loc = score_action(&pair.loc_action, a, &b.elements, &sh.reward_cfg);
            vec![
                Line::from(vec![
                    Span::styled("valid: ", th.good()),
                    Span::styled(line(&a.short()), th.text()),
                ]),
                decision_line("vs mined target", &vs_mined, th),
                decision_line("loc action vs this", &loc, th),
            ]
        }
        Err(e) => vec![Line::from(vec![
            Span::styled("invalid: ", th.bad()),
            Span::styled(line(e), th.text()),
        ])],
    }
}
