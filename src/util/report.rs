//! The one place errors and warnings reach the terminal: every command's error (from
//! `main`) and the workbench's start-up failure are printed here, cleaned with the
//! same rules as the workbench's text ([`super::sanitize`]), so file names, record
//! text or TOML quoted in a message can never move the cursor, retitle the terminal
//! or write to the clipboard.

use super::sanitize::clean_text;

/// The error and its causes as one text (`{e:#}`: causes joined by `: `), safe for a
/// terminal: escape sequences removed, other control characters made visible.
/// Newlines of multi-line messages (an import's list of problems) are kept.
pub fn render(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let mut out = String::with_capacity(text.len().min(64 << 10));
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&clean_text(&clip(line)));
    }
    out
}

/// Longest line of an error printed: a message that quotes a huge value (a 20 MB
/// name in a library's error) is cut, its length said.
const MAX_LINE_BYTES: usize = 2000;

fn clip(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LINE_BYTES {
        return line.into();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &line[..end], line.len()).into()
}

/// Whether the error comes from writing to a closed pipe (`rmsweb stats | head`).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Exit status of a command whose standard output was closed: what a shell reports
/// for a process ended by SIGPIPE (128 + 13).
pub const CLOSED_STDOUT_EXIT: u8 = 141;

/// Prints `error: …` (cleaned) to standard error and returns the exit status for it:
/// 1, or [`CLOSED_STDOUT_EXIT`] without a message when the output pipe was closed.
pub fn report_error(e: &anyhow::Error) -> u8 {
    if is_broken_pipe(e) {
        return CLOSED_STDOUT_EXIT;
    }
    eprintln!("error: {}", render(e));
    1
}

/// Prints `warning: …` (cleaned, on one line) to standard error.
pub fn warn(message: &str) {
    eprintln!("warning: {}", super::sanitize::clean_line(message));
}

/// Makes a write to a closed standard output end the process quietly, as `cat` or
/// `grep` do (status 141 in the shell), instead of a panic in `println!`. Rust
/// ignores SIGPIPE so that writes return an error. With the default restored, a
/// socket written with `writev` (hyper and tokio do; only `send` carries
/// `MSG_NOSIGNAL`) would end the process too when its peer hangs up: call this
/// only in commands that open no socket.
pub fn exit_quietly_on_closed_stdout() {
    // SAFETY: resetting a signal's disposition to its default is async-signal-safe
    // and has no memory effects; called before any thread that could write starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_lose_escape_sequences_and_keep_their_lines() {
        let e = anyhow::anyhow!("bad op `\u{1b}]52;c;aGk=\u{7}x` in\u{9b}2J a.jsonl")
            .context("reading \u{1b}]0;title\u{7}annotations");
        let text = render(&e);
        assert_eq!(text, "reading annotations: bad op `x` in a.jsonl");
        let multi = anyhow::anyhow!("2 problems:\nfirst\u{7}\nsecond");
        assert_eq!(render(&multi), "2 problems:\nfirst\u{FFFD}\nsecond");
    }

    #[test]
    fn a_closed_pipe_is_recognised_through_context() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = anyhow::Error::new(io).context("writing the table");
        assert!(is_broken_pipe(&e));
        assert_eq!(report_error(&e), CLOSED_STDOUT_EXIT);
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
