//! The input of `weir enqueue`, line by line, each bounded by the envelope limit.

use std::io::BufRead;

/// The input's lines, numbered from 1, without their line ending, as bytes (a line that is
/// not UTF-8 is a bad line, not a read error). A line longer than `max` bytes (the envelope
/// limit: its job could not be stored) is read past without being kept, so memory stays
/// bounded by `max` whatever the input, and comes out as an error for its line number. The
/// first read error ends the input and is kept in `error`: a read that failed (a
/// directory, a device error) fails again, so reading on would spin.
pub(super) struct Lines<'a> {
    pub(super) reader: Box<dyn BufRead + Send>,
    pub(super) line_no: usize,
    pub(super) max: usize,
    pub(super) error: &'a mut Option<std::io::Error>,
    /// A line that did not end within the reader's buffer, gathered (reused from line to
    /// line).
    pub(super) line: Vec<u8>,
}

impl Lines<'_> {
    /// Calls `f` with the next line and its number, and returns what it returns; `None` at
    /// the end of the input or at a read error. A line that ends within the reader's
    /// buffer (almost every line) is lent from there, with no copy.
    pub(super) fn with_next<R>(&mut self, f: impl FnOnce(usize, Result<&[u8], String>) -> R) -> Option<R> {
        if self.error.is_some() {
            return None;
        }
        let buf = fill(&mut *self.reader, self.error)?;
        // Within the limit: `max` bytes of content and a "\r\n" ending.
        if let Some(end) = memchr::memchr(b'\n', buf)
            && end < self.max + 2
        {
            self.line_no += 1;
            let r = f(self.line_no, Ok(trim_end(&buf[..end])));
            self.reader.consume(end + 1);
            return Some(r);
        }
        self.gather().map(|(no, line)| f(no, line))
    }

    /// The next line, gathered over as many buffers as it spans.
    fn gather(&mut self) -> Option<(usize, Result<&[u8], String>)> {
        self.line.clear();
        let (mut any, mut over) = (false, false);
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    *self.error = Some(e);
                    return None;
                }
            };
            if buf.is_empty() {
                break;
            }
            any = true;
            let end = memchr::memchr(b'\n', buf);
            let n = end.map_or(buf.len(), |i| i + 1);
            // `max` bytes of content, and a "\r\n" ending.
            if !over && self.line.len() + n > self.max + 2 {
                over = true;
                self.line = Vec::new();
            }
            if !over {
                self.line.extend_from_slice(&buf[..n]);
            }
            self.reader.consume(n);
            if end.is_some() {
                break;
            }
        }
        if !any {
            return None;
        }
        self.line_no += 1;
        if over {
            let e = format!("longer than the envelope limit of {} bytes: skipped", self.max);
            return Some((self.line_no, Err(e)));
        }
        Some((self.line_no, Ok(trim_end(&self.line))))
    }
}

/// `reader`'s buffer, filled; `None` at the end of the input or at a read error (kept in
/// `error`).
fn fill<'r>(reader: &'r mut (dyn BufRead + Send), error: &mut Option<std::io::Error>) -> Option<&'r [u8]> {
    loop {
        match reader.fill_buf() {
            Ok([]) => return None,
            // Asked again to return it: a borrow returned from within the loop would
            // outlive the retry (the buffer is filled already, so nothing is read).
            Ok(_) => return reader.fill_buf().ok(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                *error = Some(e);
                return None;
            }
        }
    }
}

/// `line` without its line ending ("\n" or "\r\n").
fn trim_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` read through a buffer of `capacity` bytes, with a limit of
    /// `max`: (number, the line or why not).
    fn read(input: &[u8], capacity: usize, max: usize) -> Vec<(usize, Result<String, String>)> {
        let mut error = None;
        let mut lines = Lines {
            reader: Box::new(std::io::BufReader::with_capacity(
                capacity,
                std::io::Cursor::new(input.to_vec()),
            )),
            line_no: 0,
            max,
            error: &mut error,
            line: Vec::new(),
        };
        let mut out = Vec::new();
        while let Some(l) = lines.with_next(|n, l| (n, l.map(|b| String::from_utf8(b.to_vec()).unwrap()))) {
            out.push(l);
        }
        assert!(error.is_none());
        out
    }

    #[test]
    fn lines_come_whole_whatever_the_buffer_and_long_ones_are_refused() {
        let input = b"first\r\nsecond\n\n0123456789ab\nover the limit of ten\n123456789\r\nlast";
        let ok = |n, s: &str| (n, Ok(s.to_owned()));
        let expected = vec![
            ok(1, "first"),
            ok(2, "second"),
            ok(3, ""),
            // Ten bytes of content and an ending of two: "ab" is past the limit.
            (
                4,
                Err("longer than the envelope limit of 10 bytes: skipped".to_owned()),
            ),
            (
                5,
                Err("longer than the envelope limit of 10 bytes: skipped".to_owned()),
            ),
            ok(6, "123456789"),
            ok(7, "last"),
        ];
        // Buffers smaller than a line, about a line, and holding all of it: lines lent
        // from the buffer, gathered over buffers, and both.
        for capacity in [1, 3, 7, 12, 13, 64, 1 << 20] {
            assert_eq!(read(input, capacity, 10), expected, "buffer of {capacity}");
        }
    }
}
