//! The terminal event loop: crossterm input on a reader thread, a tokio loop that
//! handles every pending key and mouse event before drawing once, and terminal restoration on exit,
//! error or panic.

use super::app::{App, Options};
use super::components::runs::RunsOptions;
use super::graphics_query;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use ratatui_image::picker::Picker;
use std::time::Duration;

/// How long the terminal may take to answer the graphics query before halfblocks
/// are used (the library's default of seconds would delay the first frame in
/// terminals that never answer, tmux among them); `RMSWEB_PICKER_TIMEOUT_MS`
/// overrides it, for slow links.
const QUERY_TIMEOUT_MS: u64 = 250;

/// Chooses how screenshots are drawn: `RMSWEB_PICKER=halfblocks` forces halfblocks;
/// otherwise the terminal is asked (kitty / sixel, see [`graphics_query`]), with
/// halfblocks when it does not answer in time. Raw mode must be on.
pub fn pick_protocol() -> Picker {
    if std::env::var("RMSWEB_PICKER").is_ok_and(|v| v == "halfblocks") {
        return Picker::halfblocks();
    }
    let timeout = std::env::var("RMSWEB_PICKER_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(QUERY_TIMEOUT_MS);
    graphics_query::picker_for(graphics_query::query(Duration::from_millis(timeout)))
}

/// Restores the terminal when dropped (normal exit, `?` error, or unwinding):
/// mouse reporting off (when it was turned on), then raw mode and the alternate
/// screen.
struct Restore {
    mouse: bool,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if self.mouse {
            let _ = ratatui::crossterm::execute!(
                std::io::stdout(),
                ratatui::crossterm::event::DisableMouseCapture
            );
        }
        ratatui::restore();
    }
}

/// Opens the workbench in the terminal until the user quits. `opts.picker` is
/// replaced by the terminal's own graphics protocol. A dataset that cannot be
/// opened is reported before the terminal is touched.
pub fn run(opts: Options) -> anyhow::Result<()> {
    run_with_runs(opts, RunsOptions::default(), true)
}

/// Like [`run`], with the Runs tab watching `runs` (polled on a background thread);
/// `mouse` turns on mouse reporting (clicks and the wheel; off leaves the
/// terminal's own text selection to the user).
pub fn run_with_runs(opts: Options, runs: RunsOptions, mouse: bool) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut app = App::new(opts)?;
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        anyhow::bail!(
            "the workbench needs a terminal (standard input and output are not one); \
             without one use the subcommands: `rmsweb stats`, `rmsweb show`, \
             `rmsweb annotate export|counts`, `rmsweb eval compare`, `rmsweb recipe status` \
             (`rmsweb --help` lists them all)"
        );
    }
    app.set_runs(runs);
    app.views.runs.start_background()?;
    // ratatui::init installs a panic hook that restores the terminal first.
    let mut terminal = ratatui::try_init()?;
    let _restore = Restore { mouse };
    if mouse {
        ratatui::crossterm::execute!(
            std::io::stdout(),
            ratatui::crossterm::event::EnableMouseCapture
        )?;
    }
    app.set_picker(pick_protocol());
    terminal.draw(|f| app.draw(f))?;
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        std::thread::Builder::new()
            .name("rmsweb-input".into())
            .spawn(move || {
                while let Ok(ev) = event::read() {
                    if tx.send(ev).is_err() {
                        break;
                    }
                }
            })?;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            let redraw = tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    let mut redraw = apply(&mut app, ev);
                    while let Ok(more) = rx.try_recv() {
                        redraw |= apply(&mut app, more);
                    }
                    redraw
                }
                _ = tick.tick() => app.tick(),
            };
            if app.should_quit() {
                break;
            }
            if redraw {
                terminal.draw(|f| app.draw(f))?;
            }
        }
        anyhow::Ok(())
    })
}

fn apply(app: &mut App, ev: Event) -> bool {
    match ev {
        Event::Key(k) if k.kind == KeyEventKind::Press => {
            app.handle_key(k);
            true
        }
        Event::Mouse(m) => {
            app.handle_mouse(m);
            // Moves and drags without a button change nothing on screen.
            super::components::Pointer::of(&m).is_some()
        }
        Event::Resize(..) => true,
        _ => false,
    }
}
