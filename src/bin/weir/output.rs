//! What the commands print: counts in words ("1 job", "3 jobs"), ages, aligned tables,
//! JSON documents, and the confirmation asked before deleting many jobs.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;
use weir::queue::json::Timestamp;

/// `s` safe for a terminal: control characters (C0, DEL, C1: escape sequences, carriage
/// returns, new lines) written as Rust escapes (`\u{1b}`, `\n`), everything else as
/// it is. Text from jobs, handlers and Redis goes through it before a human-readable
/// listing prints it (JSON output escapes them by itself).
pub(crate) fn term(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// `n` and `noun`, plural unless `n` is 1: `1 job`, `0 jobs`, `3 jobs`.
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A duration for people: `850ms`, `12.5s`, `3m 20s`, `2h 5m` (down to the second).
pub(crate) fn age(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
}

/// A time relative to `now`, with the date: `2026-12-02T00:00:00.000Z (3m 20s ago)`.
pub(crate) fn when(t: Timestamp, now: Timestamp) -> String {
    if t >= now {
        format!("{t} (in {})", age(t.until(now)))
    } else {
        format!("{t} ({} ago)", age(t.age(now)))
    }
}

/// Prints `value` as one JSON document on standard output.
pub(crate) fn json<T: serde::Serialize>(value: &T) -> crate::error::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Rows aligned in columns (two spaces apart), the first row a header.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    // Cells hold what jobs, handlers and Redis said: never a raw control character.
    let escaped: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| term(c).into_owned()).collect())
        .collect();
    let rows = &escaped;
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{s:<w$}", w = widths[i]))
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// Refuses, before anything is touched, an action that needs confirmation when it cannot
/// be asked for: standard input is not a terminal and `--yes` was not given (a script
/// must say `--yes`). A usage error.
pub(crate) fn unattended(action: &str, yes: bool) -> crate::error::Result<()> {
    if yes || std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(crate::usage(format!(
        "{action} needs confirmation, and standard input is not a terminal: pass --yes"
    )))
}

/// Asks before an action that deletes many jobs (after [`unattended`] let it through):
/// `--yes` skips the question; on a terminal the answer must be `y` or `yes`.
pub(crate) fn confirm(action: &str, yes: bool) -> crate::error::Result<()> {
    unattended(action, yes)?;
    if yes {
        return Ok(());
    }
    eprint!("{action}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(crate::failure("not confirmed: nothing done")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ages_and_tables_read_as_words() {
        assert_eq!(
            (count(1, "job"), count(0, "job"), count(3, "job")),
            ("1 job".into(), "0 jobs".into(), "3 jobs".into())
        );
        assert_eq!(age(Duration::from_millis(850)), "850ms");
        assert_eq!(age(Duration::from_millis(12_500)), "12.5s");
        assert_eq!(age(Duration::from_millis(200_400)), "3m 20s");
        let t = table(&[vec!["A".into(), "BB".into()], vec!["ccc".into(), "d".into()]]);
        assert_eq!(t, "A    BB\nccc  d\n");
        let now = Timestamp(1_000_000);
        assert_eq!(
            when(Timestamp(990_000), now),
            "1970-01-01T00:16:30.000Z (10.0s ago)"
        );
        assert_eq!(
            when(Timestamp(1_060_000), now),
            "1970-01-01T00:17:40.000Z (in 1m)"
        );
    }
}
