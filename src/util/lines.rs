//! Reading lines of bounded length from any reader (standard input included): a
//! line longer than the bound is skipped without being held in memory and reported
//! with its length, and a line that is not UTF-8 is reported in place, so one bad
//! line never stops a run or exhausts memory.

use std::io::{self, BufRead};

/// One line read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The line's text, without its `\n` (or `\r\n`).
    Text(String),
    /// Not UTF-8: the byte offset in the line where it stops being valid.
    NotUtf8(usize),
    /// Longer than the bound: its length in bytes (it was skipped).
    TooLong(u64),
}

/// Lines of at most `max` bytes from a reader.
pub struct BoundedLines<R> {
    inner: R,
    max: usize,
}

impl<R: BufRead> BoundedLines<R> {
    /// Reads `inner` line by line, each of at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        BoundedLines { inner, max }
    }

    /// The next line, or `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut buf = Vec::new();
        let mut total: u64 = 0;
        let mut saw_any = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            saw_any = true;
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            total += take as u64;
            if total as usize <= self.max {
                buf.extend_from_slice(&chunk[..take]);
            } else {
                buf = Vec::new();
            }
            self.inner.consume(take + usize::from(done));
            if done {
                break;
            }
        }
        if !saw_any {
            return Ok(None);
        }
        if total as usize > self.max {
            return Ok(Some(Line::TooLong(total)));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Some(match String::from_utf8(buf) {
            Ok(s) => Line::Text(s),
            Err(e) => Line::NotUtf8(e.utf8_error().valid_up_to()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_and_binary_lines_are_reported_in_place() {
        let input = b"ok\r\n0123456789\n\xff\xfe\n\nlast".to_vec();
        let mut r = BoundedLines::new(std::io::BufReader::with_capacity(3, &input[..]), 5);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push(l);
        }
        assert_eq!(
            got,
            [
                Line::Text("ok".into()),
                Line::TooLong(10),
                Line::NotUtf8(0),
                Line::Text(String::new()),
                Line::Text("last".into()),
            ]
        );
    }
}
