//! Asking the terminal which graphics protocol it speaks (kitty, sixel) and its cell
//! size, without ever leaving a reader behind.
//!
//! ratatui-image's own query reads stdin on a thread that stays blocked after its
//! timeout when the terminal does not answer (tmux, many SSH setups): that thread then
//! swallows the user's first key. Here the query is written, and the answer read with
//! `poll(2)` on stdin until the deadline, on the calling thread; when the time is up
//! nothing is left reading. ratatui-image's parser interprets the answer.

use ratatui_image::picker::cap_parser::{Parser, QueryStdioOptions, Response};
use ratatui_image::picker::{Picker, ProtocolType};
use std::io::Write;
use std::time::{Duration, Instant};

/// What the terminal's answer says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub protocol: Option<ProtocolType>,
    /// Cell size in pixels (width, height).
    pub cell: Option<(u16, u16)>,
}

/// Interprets parsed responses: kitty wins over sixel; the cell size when reported.
pub fn interpret(responses: &[Response]) -> Answer {
    let mut a = Answer::default();
    for r in responses {
        match r {
            Response::Kitty => a.protocol = Some(ProtocolType::Kitty),
            Response::Sixel if a.protocol.is_none() => a.protocol = Some(ProtocolType::Sixel),
            Response::CellSize(Some((w, h))) if *w > 0 && *h > 0 => a.cell = Some((*w, *h)),
            _ => {}
        }
    }
    a
}

/// Feeds bytes to the parser; `true` once the terminal's status report (the answer's
/// last part) has arrived.
pub fn feed(parser: &mut Parser, bytes: &[u8], out: &mut Vec<Response>) -> bool {
    for &b in bytes {
        for r in parser.push(char::from(b)) {
            if r == Response::Status {
                return true;
            }
            out.push(r);
        }
    }
    false
}

fn in_tmux() -> bool {
    std::env::var("TERM").is_ok_and(|t| t.starts_with("tmux"))
        || std::env::var("TERM_PROGRAM").is_ok_and(|t| t == "tmux")
}

/// Waits up to `left` for stdin to be readable.
fn stdin_readable(left: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = left.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd, count 1.
    let r = unsafe { libc::poll(&mut fd, 1, ms) };
    r > 0 && fd.revents & libc::POLLIN != 0
}

/// Reads what is available on stdin (unbuffered: nothing is kept from crossterm).
fn read_stdin(buf: &mut [u8]) -> usize {
    // SAFETY: `buf` is valid for `buf.len()` bytes.
    let n = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).unwrap_or(0)
}

/// Queries the terminal (raw mode must be on) and waits at most `timeout` for the
/// whole answer. `None` when it did not answer in time or stdout failed.
pub fn query(timeout: Duration) -> Option<Answer> {
    let options = QueryStdioOptions {
        timeout,
        ..Default::default()
    };
    let q = Parser::query(in_tmux(), options);
    let mut out = std::io::stdout();
    out.write_all(q.as_bytes()).ok()?;
    out.flush().ok()?;
    let deadline = Instant::now() + timeout;
    let mut parser = Parser::new();
    let mut responses = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !stdin_readable(left) {
            return None;
        }
        let n = read_stdin(&mut buf);
        if n == 0 {
            return None;
        }
        if feed(&mut parser, &buf[..n], &mut responses) {
            return Some(interpret(&responses));
        }
    }
}

/// The picker for an answer: its protocol (halfblocks when none) and cell size
/// (the window's pixel size over its cells when the terminal did not report one).
pub fn picker_for(answer: Option<Answer>) -> Picker {
    let mut p = Picker::halfblocks();
    let Some(a) = answer else { return p };
    let cell = a.cell.or_else(|| {
        let ws = ratatui::crossterm::terminal::window_size().ok()?;
        (ws.width > 0 && ws.height > 0 && ws.columns > 0 && ws.rows > 0)
            .then(|| (ws.width / ws.columns, ws.height / ws.rows))
    });
    if let Some((w, h)) = cell {
        #[allow(deprecated)] // the one constructor that takes a known cell size
        {
            p = Picker::from_fontsize(ratatui_image::FontSize::new(w, h));
        }
    }
    p.set_protocol_type(a.protocol.unwrap_or(ProtocolType::Halfblocks));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_up_to_the_status_report() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        // Kitty's OK, a cell size report, then the status report.
        let kitty = b"\x1b_Gi=31;OK\x1b\\";
        assert!(!feed(&mut parser, kitty, &mut out));
        assert!(!feed(&mut parser, b"\x1b[6;20;10t", &mut out));
        assert!(feed(&mut parser, b"\x1b[0n", &mut out));
        let a = interpret(&out);
        assert_eq!(a.protocol, Some(ProtocolType::Kitty));
        assert_eq!(a.cell, Some((10, 20)));
        let p = picker_for(Some(a));
        assert_eq!(p.protocol_type(), ProtocolType::Kitty);
        let f = p.font_size();
        assert_eq!((f.width, f.height), (10, 20));
    }

    #[test]
    fn sixel_only_when_kitty_is_absent_and_silence_means_halfblocks() {
        let a = interpret(&[Response::Sixel, Response::CellSize(None)]);
        assert_eq!(a.protocol, Some(ProtocolType::Sixel));
        assert_eq!(a.cell, None);
        let a = interpret(&[Response::Kitty, Response::Sixel]);
        assert_eq!(a.protocol, Some(ProtocolType::Kitty));
        assert_eq!(picker_for(None).protocol_type(), ProtocolType::Halfblocks);
        assert_eq!(
            picker_for(Some(Answer::default())).protocol_type(),
            ProtocolType::Halfblocks
        );
    }
}
