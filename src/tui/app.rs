//! The app: owns the views and the shared state, routes keys, applies actions
//! (`update`) and draws the frame (tab bar · view · status bar · overlays).

use super::action::{Action, Tab};
use super::components::curriculum::CurriculumView;
use super::components::runs::{RunsOptions, RunsView};
use super::components::{Component, help};
use super::shared::{SaveState, Shared, load};
use super::theme::Theme;
use super::widgets::screenshot::ImageCache;
use crate::annotate::AnnotationEvent;
use crate::trajectory::Dataset;
use crate::tui::widgets::text::line;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs};
use ratatui_image::picker::Picker;
use std::path::PathBuf;
use std::sync::Arc;

/// How to open the workbench.
pub struct Options {
    pub dataset: PathBuf,
    pub annotator: String,
    pub theme: Theme,
    /// How screenshots are drawn (`Picker::halfblocks()` in tests).
    pub picker: Picker,
}

/// The workbench.
pub struct App {
    pub shared: Shared,
    pub tab: Tab,
    /// Each tab's view.
    pub views: Views,
    /// The curriculum view, shown in the Runs tab while open.
    pub curriculum: Option<CurriculumView>,
    pub help: bool,
    /// The help overlay's first row shown (`j`/`k` while it is open).
    help_offset: usize,
    /// The filter prompt's text while it is open.
    pub filter_input: Option<String>,
    quit: bool,
    /// Whether the last frame was drawn with the highlighter loaded.
    highlighted: bool,
    /// Where the last frame put the tab titles (one span of columns per tab, on
    /// the top row) and the status bar's `? help` (for the mouse).
    tab_spans: Vec<std::ops::Range<u16>>,
    help_button: Rect,
}

/// The views struct and the tab-to-view map from the table of tabs
/// ([`crate::tui::tabs`]).
macro_rules! tab_views {
    ($($variant:ident, $title:literal, $field:ident: $module:ident::$view:ident;)+) => {
        /// Each tab's view.
        #[derive(Default)]
        pub struct Views {
            $(pub $field: super::components::$module::$view,)+
        }

        impl Views {
            /// The view of `tab`.
            pub fn get(&mut self, tab: Tab) -> &mut dyn Component {
                match tab {
                    $(Tab::$variant => &mut self.$field,)+
                }
            }
        }
    };
}
super::tabs::with_tabs!(tab_views);

impl App {
    /// Opens the dataset (line index only) and starts reading summaries, tasks and
    /// pairs on a background thread; the first frame can be drawn at once.
    pub fn new(opts: Options) -> anyhow::Result<App> {
        let dataset = Arc::new(Dataset::open(&opts.dataset)?);
        super::widgets::highlight::warm_up_in_background();
        let (tx, rx) = std::sync::mpsc::channel();
        let ds = Arc::clone(&dataset);
        std::thread::Builder::new()
            .name("rmsweb-loader".into())
            .spawn(move || {
                // Leave one core to the UI thread so keys stay quick while loading.
                let threads = std::thread::available_parallelism()
                    .map_or(1, |n| n.get().saturating_sub(1).max(1));
                match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                    Ok(pool) => pool.install(|| load(&ds, &tx)),
                    Err(_) => load(&ds, &tx),
                }
            })?;
        let shared = Shared::new(
            dataset,
            opts.annotator,
            opts.theme,
            ImageCache::new(opts.picker),
            rx,
        )?;
        Ok(App {
            shared,
            tab: Tab::ALL[0],
            views: Views::default(),
            curriculum: None,
            help: false,
            help_offset: 0,
            filter_input: None,
            quit: false,
            highlighted: false,
            tab_spans: Vec::new(),
            help_button: Rect::default(),
        })
    }

    /// Blocks until the background load is done and the highlighter is ready
    /// (tests, benches).
    pub fn wait_loaded(&mut self) {
        self.shared.poll_loader(true);
        super::widgets::highlight::warm_up();
    }

    /// Takes background results that arrived; true when the frame must be redrawn
    /// (new data, new run metrics, or the highlighter became ready since the last
    /// frame).
    pub fn tick(&mut self) -> bool {
        let data = self.shared.poll_loader(false);
        let runs = self.views.runs.tick();
        data || runs || (!self.highlighted && super::widgets::highlight::ready())
    }

    /// Points the Runs tab at a runs folder and extra metrics files (replacing
    /// the default view, which watches nothing).
    pub fn set_runs(&mut self, opts: RunsOptions) {
        self.views.runs = RunsView::new(opts);
    }

    /// Replaces how screenshots are drawn (once the terminal has been asked).
    pub fn set_picker(&mut self, picker: Picker) {
        self.shared.images = ImageCache::new(picker);
    }

    /// Whether the user asked to quit.
    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// The view of the current tab (in the Runs tab: the curriculum while open),
    /// and the shared state beside it. The one place a tab is mapped to its view.
    fn view_and_shared(&mut self) -> (&mut dyn Component, &mut Shared) {
        let App {
            shared,
            tab,
            views,
            curriculum,
            ..
        } = self;
        let view: &mut dyn Component = match (tab, curriculum) {
            (Tab::Runs, Some(c)) => c,
            (tab, _) => views.get(*tab),
        };
        (view, shared)
    }

    fn view(&mut self) -> &mut dyn Component {
        self.view_and_shared().0
    }

    /// Passes a key or mouse event on to the current view and applies its action.
    fn pass_to_view(&mut self, f: impl FnOnce(&mut dyn Component, &mut Shared) -> Option<Action>) {
        let (view, sh) = self.view_and_shared();
        if let Some(a) = f(view, sh) {
            self.update(a);
        }
    }

    /// Handles one key press.
    pub fn handle_key(&mut self, key: KeyEvent) {
        if key.kind != KeyEventKind::Press {
            return;
        }
        self.shared.message = None;
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.update(Action::Quit);
            return;
        }
        if let Some(input) = &mut self.filter_input {
            match key.code {
                KeyCode::Enter => self.filter_input = None,
                KeyCode::Esc => {
                    self.filter_input = None;
                    self.view().set_filter("");
                }
                KeyCode::Backspace => {
                    input.pop();
                    let f = input.clone();
                    self.view().set_filter(&f);
                }
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    input.push(c);
                    let f = input.clone();
                    self.view().set_filter(&f);
                }
                _ => {}
            }
            return;
        }
        if self.help {
            match key.code {
                KeyCode::Char('?') | KeyCode::Esc | KeyCode::Char('q') => self.help = false,
                KeyCode::Char('j') | KeyCode::Down => self.help_offset += 1,
                KeyCode::Char('k') | KeyCode::Up => {
                    self.help_offset = self.help_offset.saturating_sub(1)
                }
                _ => {}
            }
            return;
        }
        if self.view().captures_text() {
            return self.pass_to_view(|v, sh| v.handle_key(key, sh));
        }
        let digit = match key.code {
            KeyCode::Char(c) => c.to_digit(10),
            _ => None,
        };
        let action = match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            // `1`… switch to the tab of that number.
            _ if digit.is_some_and(|d| (1..=Tab::ALL.len() as u32).contains(&d)) => {
                digit.map(|d| Action::SwitchTab(Tab::ALL[d as usize - 1]))
            }
            KeyCode::Char('?') => Some(Action::ToggleHelp),
            KeyCode::Char('/') => Some(Action::StartFilter),
            KeyCode::Tab => {
                self.view().cycle_focus(true);
                None
            }
            KeyCode::BackTab => {
                self.view().cycle_focus(false);
                None
            }
            _ => return self.pass_to_view(|v, sh| v.handle_key(key, sh)),
        };
        if let Some(a) = action {
            self.update(a);
        }
    }

    /// Handles one mouse event: a click on a tab title switches to it, on `? help`
    /// opens the help; while the help is open the wheel scrolls it and a click
    /// closes it; everything else goes to the view (rows, panes, charts). Nothing
    /// while the filter prompt is open.
    pub fn handle_mouse(&mut self, ev: MouseEvent) {
        let Some(p) = super::components::Pointer::of(&ev) else {
            return;
        };
        if self.filter_input.is_some() {
            return;
        }
        if self.help {
            match p {
                super::components::Pointer::Scroll(_, true) => self.help_offset += 1,
                super::components::Pointer::Scroll(_, false) => {
                    self.help_offset = self.help_offset.saturating_sub(1)
                }
                super::components::Pointer::Click(_) => self.help = false,
            }
            return;
        }
        if let super::components::Pointer::Click(at) = p {
            if at.y == 0
                && let Some(i) = self.tab_spans.iter().position(|r| r.contains(&at.x))
            {
                self.shared.message = None;
                self.update(Action::SwitchTab(Tab::ALL[i]));
                return;
            }
            if self.help_button.contains(at) {
                self.update(Action::ToggleHelp);
                return;
            }
        }
        self.pass_to_view(|v, sh| v.handle_mouse(ev, sh));
    }

    /// Applies an action.
    pub fn update(&mut self, action: Action) {
        match action {
            Action::Quit => self.quit = true,
            Action::SwitchTab(t) => self.tab = t,
            Action::ToggleHelp => {
                self.help = !self.help;
                self.help_offset = 0;
            }
            Action::StartFilter => {
                self.filter_input = Some(self.view().filter().to_string());
            }
            Action::Annotate {
                pair_id,
                op,
                value,
                prev,
            } => {
                let ev = AnnotationEvent::now(&self.shared.annotator, &pair_id, op, value, prev);
                self.shared.annotate(ev);
            }
            Action::Message(m) => self.shared.message = Some(m),
            Action::OpenRollouts(dir) => match self.views.reward.open_rollouts(&dir) {
                Ok(m) => {
                    self.tab = Tab::Reward;
                    self.shared.message = Some(m);
                }
                Err(e) => self.shared.message = Some(e),
            },
            Action::OpenCurriculum(dir) => match CurriculumView::open(&dir) {
                Ok(v) => {
                    self.curriculum = Some(v);
                    self.tab = Tab::Runs;
                }
                Err(e) => self.shared.message = Some(e),
            },
            Action::CloseCurriculum => self.curriculum = None,
            Action::ShowPair(id) => {
                if self.views.pairs.select_pair(&id, &self.shared) {
                    self.tab = Tab::Pairs;
                } else {
                    self.shared.message = Some(if self.shared.pairs_loaded {
                        format!(
                            "no mined pair `{id}` in this dataset (the run may have trained on another)"
                        )
                    } else {
                        "the mined pairs are still loading".into()
                    });
                }
            }
        }
    }

    /// Draws the whole frame.
    pub fn draw(&mut self, f: &mut Frame) {
        self.highlighted = super::widgets::highlight::ready();
        let th = self.shared.theme.clone();
        let area = f.area();
        f.render_widget(Paragraph::new("").style(th.text()), area);
        let [tabs, body, status] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(area);
        let titles: Vec<Line> = Tab::ALL
            .iter()
            .enumerate()
            .map(|(i, t)| Line::from(format!("{} {}", i + 1, t.title())))
            .collect();
        let selected = Tab::ALL.iter().position(|t| *t == self.tab).unwrap_or(0);
        // Each title is drawn with one cell of padding either side and a one-cell
        // divider between titles.
        let mut x = tabs.x;
        self.tab_spans = titles
            .iter()
            .map(|t| {
                let w = t.width() as u16 + 2;
                let span = x..x.saturating_add(w);
                x = x.saturating_add(w + 1);
                span
            })
            .collect();
        f.render_widget(
            Tabs::new(titles)
                .select(selected)
                .style(th.dim())
                .highlight_style(th.label().add_modifier(ratatui::style::Modifier::REVERSED))
                .divider("│"),
            tabs,
        );
        let (view, sh) = self.view_and_shared();
        view.draw(f, body, sh);
        let keys = view.keys();
        self.draw_status(f, status);
        if self.help {
            self.help_offset = help::draw(f, body, &th, keys, self.help_offset);
        }
    }

    fn draw_status(&mut self, f: &mut Frame, area: ratatui::layout::Rect) {
        let sh = &self.shared;
        let th = &sh.theme;
        if let Some(input) = &self.filter_input {
            let l = Line::from(vec![
                Span::styled("/", th.label()),
                Span::styled(line(input), th.text()),
                Span::styled("▏", th.label()),
                Span::styled("  Enter keeps · Esc clears", th.dim()),
            ]);
            f.render_widget(Paragraph::new(l), area);
            self.help_button = Rect::default();
            return;
        }
        let mut spans = self.status_spans();
        let sh = &self.shared;
        let th = &sh.theme;
        let sep = Span::styled(" │ ", th.dim());
        // `? help` keeps its place at the right edge however long the rest is,
        // unless a message of the moment needs the room.
        let help = Line::from(vec![sep, Span::styled("? help", th.dim())]);
        let room = usize::from(area.width);
        // On a narrow bar the dataset's counts and the annotator's name (spans 2-5)
        // give way first: the save state, the review count, conflicts, the filter and
        // a message of the moment matter more.
        let width = |s: &[Span]| s.iter().map(Span::width).sum::<usize>();
        let mut given_way = 0;
        while given_way < 2 && width(&spans) + help.width() > room {
            spans.drain(2..4);
            given_way += 1;
        }
        let left = Line::from(spans);
        if sh.message.is_some() && left.width() + help.width() > room {
            self.help_button = Rect::default();
            f.render_widget(Paragraph::new(left), area);
            return;
        }
        let [left_area, right] = ratatui::layout::Layout::horizontal([
            ratatui::layout::Constraint::Min(0),
            ratatui::layout::Constraint::Length(help.width() as u16),
        ])
        .areas(area);
        f.render_widget(Paragraph::new(left), left_area);
        f.render_widget(Paragraph::new(help), right);
        // `? help` without the separator before it.
        self.help_button = Rect {
            x: right.x + 3,
            width: right.width.saturating_sub(3),
            ..right
        };
    }

    /// The status bar's facts, in order: dataset, counts, annotator, save state,
    /// review count, conflicts, the filter, unreadable records, a message.
    fn status_spans(&mut self) -> Vec<Span<'static>> {
        let filter = self.view().filter().to_string();
        let sh = &self.shared;
        let th = &sh.theme;
        let sep = Span::styled(" │ ", th.dim());
        let (done, total) = sh.reviewed();
        let name = if crate::util::user_data::is_fixtures_copy(sh.dataset.root()) {
            format!(
                "{} (your copy: {})",
                sh.dataset.meta().name,
                home_short(sh.dataset.root())
            )
        } else {
            sh.dataset.meta().name.clone()
        };
        let mut spans = vec![
            Span::styled(line(&name), th.label()),
            sep.clone(),
            Span::styled(
                format!(
                    "{} traj · {} tasks · {}",
                    sh.dataset.trajectory_count(),
                    sh.dataset.task_count(),
                    if sh.pairs_loaded {
                        format!("{} pairs", sh.pairs.len())
                    } else {
                        "pairs …".into()
                    }
                ),
                th.text(),
            ),
            sep.clone(),
            Span::styled(format!("annotator: {}", line(&sh.annotator)), th.text()),
            sep.clone(),
            match &sh.saved {
                SaveState::Idle => Span::styled("no changes", th.dim()),
                SaveState::Saved(t) => Span::styled(format!("saved {t}"), th.good()),
                SaveState::Failed(e) => Span::styled(format!("NOT SAVED: {}", line(e)), th.bad()),
            },
            sep.clone(),
            Span::styled(format!("{done}/{total} reviewed"), th.text()),
        ];
        let (conflicts, _) = sh.folded.conflicts();
        if conflicts > 0 {
            spans.push(sep.clone());
            spans.push(Span::styled(
                format!("≠ {conflicts} in conflict"),
                th.warn(),
            ));
        }
        if !filter.is_empty() {
            spans.push(sep.clone());
            spans.push(Span::styled(
                format!("filter: {}", line(&filter)),
                th.warn(),
            ));
        }
        if !sh.load_errors.is_empty() {
            spans.push(sep.clone());
            spans.push(Span::styled(
                format!("⚠ {} unreadable records", sh.load_errors.len()),
                th.warn(),
            ));
        }
        if let Some(m) = &sh.message {
            spans.push(sep.clone());
            spans.push(Span::styled(line(m), th.warn()));
        }
        spans
    }
}

/// `path` with the home folder written `~`.
fn home_short(path: &std::path::Path) -> String {
    match std::env::var_os("HOME").map(std::path::PathBuf::from) {
        Some(h) if h.is_absolute() && path.starts_with(&h) => match path.strip_prefix(&h) {
            Ok(rest) => format!("~/{}", rest.display()),
            Err(_) => path.display().to_string(),
        },
        _ => path.display().to_string(),
    }
}
