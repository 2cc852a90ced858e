//! The real binary in tmux: keys in, screen out, then SIGKILL and check that every
//! event the screen showed as saved is in `annotations.jsonl`.

use rmsweb::annotate::{AnnotationLog, Op};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(cmd: &str) -> Tmux {
        let socket = format!("rmsweb-test-{}-{}", std::process::id(), rand_suffix());
        let t = Tmux { socket };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "wb",
                "-x",
                "120",
                "-y",
                "40",
                cmd,
            ])
            .status
            .success();
        assert!(ok, "tmux new-session failed (is tmux installed?)");
        t
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "wb"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "wb"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status.success());
    }

    fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "`{needle}` never appeared; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pane_pid(&self) -> i32 {
        let out = self.cmd(&["display-message", "-p", "-t", "wb", "#{pane_pid}"]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("pane pid")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

fn workbench_cmd(root: &Path) -> String {
    format!(
        "exec env RMSWEB_PICKER=halfblocks {} --dataset {} --annotator e2e",
        env!("CARGO_BIN_EXE_rmsweb"),
        root.display()
    )
}

#[test]
fn tmux_accept_relabel_then_sigkill_keeps_every_saved_event() {
    let d = crate::tui::dataset();
    let t = Tmux::start(&workbench_cmd(d.path()));
    t.wait_for("1 Trajectories");
    t.wait_for("Log in as alice");
    t.keys(&["2"]);
    t.wait_for("Queue 0/3 reviewed");
    t.keys(&["a"]);
    t.wait_for("1/3 reviewed");
    // A capture can catch a frame half drawn: wait for the status bar as well.
    t.wait_for("saved ");
    // The accept moved on to the next pending pair; a relabel is a decision too.
    t.keys(&["l"]);
    t.wait_for("Relabel: press 1-8");
    t.keys(&["5"]);
    t.wait_for("2/3 reviewed");
    t.wait_for("saved ");
    // Kill the process as hard as possible right after the screen said saved.
    let pid = t.pane_pid();
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let ev = AnnotationLog::for_dataset(d.path()).read().unwrap();
    let got: Vec<(Op, &str)> = ev.iter().map(|e| (e.op, e.pair_id.as_str())).collect();
    assert_eq!(
        got,
        vec![(Op::Accept, "login-s2"), (Op::Relabel, "search-s2")]
    );
    assert!(ev.iter().all(|e| e.annotator == "e2e"));
}

#[test]
fn tmux_quit_exits_cleanly_and_leaves_the_alternate_screen() {
    let d = crate::tui::dataset();
    let t = Tmux::start(&format!(
        "{}; echo EXIT=$?; sleep 30",
        workbench_cmd(d.path()).replacen("exec ", "", 1)
    ));
    t.wait_for("1 Trajectories");
    t.keys(&["?"]);
    t.wait_for("Keys — ? or Esc closes");
    // Separate sends: ESC followed at once by q would read as Alt-q.
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    t.keys(&["q"]);
    let s = t.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(
        !s.contains("1 Trajectories"),
        "the workbench screen was left behind:\n{s}"
    );
}

/// With the terminal-graphics query on (the default), the user's very first key
/// reaches the workbench: a query the terminal leaves unanswered must not leave a
/// reader behind that swallows it.
#[test]
fn tmux_first_key_is_not_swallowed_by_the_graphics_query() {
    let d = crate::tui::dataset();
    let t = Tmux::start(&format!(
        "exec {} --dataset {} --annotator e2e",
        env!("CARGO_BIN_EXE_rmsweb"),
        d.path().display()
    ));
    t.wait_for("Log in as alice");
    // Past the query's timeout, so nothing of it is pending any more.
    std::thread::sleep(Duration::from_millis(700));
    t.keys(&["2"]);
    t.wait_for("Queue 0/3 reviewed");
}

/// Opened on the bundled fixtures (no `--dataset`), the workbench works on the
/// user's copy in the data folder, says so in the status bar, and an annotation
/// lands there, never in the source tree.
#[test]
fn tmux_bundled_fixtures_are_annotated_in_the_users_data_folder() {
    let data = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let source_log = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/annotations.jsonl");
    let before = std::fs::read(&source_log).ok();
    let t = Tmux::start(&format!(
        "cd {} && exec env RMSWEB_PICKER=halfblocks XDG_DATA_HOME={} {} --annotator e2e",
        empty.path().display(),
        data.path().display(),
        env!("CARGO_BIN_EXE_rmsweb"),
    ));
    let s = t.wait_for("your copy: ");
    assert!(
        s.contains(&data.path().display().to_string()) || s.contains("rmsweb/fixt"),
        "{s}"
    );
    t.keys(&["2"]);
    // The pairs are loaded (a pair is shown) before the key is sent.
    t.wait_for("Status: pending");
    t.keys(&["a"]);
    t.wait_for("saved ");
    let copy = data.path().join("rmsweb/fixtures");
    let ev = AnnotationLog::for_dataset(&copy).read().unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].op, ev[0].annotator.as_str()), (Op::Accept, "e2e"));
    assert_eq!(
        std::fs::read(&source_log).ok(),
        before,
        "the source tree is untouched"
    );
}

/// SGR mouse reports (what xterm, kitty, iTerm2 and tmux send once the workbench
/// asks for the mouse) as hex bytes for `send-keys -H`: a left press and release,
/// or one wheel notch down, at 0-based `(column, row)`.
fn sgr_mouse(column: usize, row: usize, wheel: bool) -> Vec<String> {
    let (x, y) = (column + 1, row + 1);
    let seqs = if wheel {
        vec![format!("\u{1b}[<65;{x};{y}M")]
    } else {
        vec![format!("\u{1b}[<0;{x};{y}M"), format!("\u{1b}[<0;{x};{y}m")]
    };
    seqs.concat().bytes().map(|b| format!("{b:02x}")).collect()
}

/// Where `needle` is on the captured screen: 0-based (column, row).
fn cell_of(screen: &str, needle: &str) -> (usize, usize) {
    screen
        .lines()
        .enumerate()
        .find_map(|(row, l)| l.find(needle).map(|byte| (l[..byte].chars().count(), row)))
        .unwrap_or_else(|| panic!("`{needle}` not on the screen:\n{screen}"))
}

/// The real binary takes the mouse: a click on a tab title switches tabs, a click
/// on a pair selects it, and the wheel moves through the queue.
#[test]
fn tmux_mouse_clicks_tabs_and_rows_and_the_wheel_scrolls() {
    let d = crate::tui::dataset();
    let t = Tmux::start(&workbench_cmd(d.path()));
    let s = t.wait_for("Log in as alice");
    let send = |bytes: Vec<String>| {
        let mut args = vec!["send-keys", "-t", "wb", "-H"];
        args.extend(bytes.iter().map(String::as_str));
        assert!(t.cmd(&args).status.success());
    };
    let (x, y) = cell_of(&s, "2 Mined pairs");
    send(sgr_mouse(x + 2, y, false));
    let s = t.wait_for("Queue 0/3 reviewed");
    // The queue's rows start with the pair's status icon (the detail's title also
    // names the pair).
    let (x, y) = cell_of(&s, "· hostile-s0 ");
    send(sgr_mouse(x, y, false));
    t.wait_for("┌ hostile-s0 ·");
    let (x, y) = cell_of(&s, "· login-s2 ");
    send(sgr_mouse(x, y, false));
    t.wait_for("┌ login-s2 ·");
    send(sgr_mouse(x, y, true));
    t.wait_for("┌ search-s2 ·");
}
