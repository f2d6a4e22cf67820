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
}

impl Iterator for Lines<'_> {
    type Item = (usize, Result<Vec<u8>, String>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.error.is_some() {
            return None;
        }
        let mut line = Vec::new();
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
            if !over && line.len() + n > self.max + 2 {
                over = true;
                line = Vec::new();
            }
            if !over {
                line.extend_from_slice(&buf[..n]);
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
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        Some((self.line_no, Ok(line)))
    }
}
