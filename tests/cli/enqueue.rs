//! `weir enqueue`: NDJSON lines, --kind mode, defaults, bad lines by number; read errors
//! stop it; memory flat in the input's size; plain lines (no job built per line) load as
//! full ones do.

use crate::common::*;
use crate::{cli, cli_within, cli_within_from, error_lines, no_panic, text};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Checks a load of that test's input: `enqueued` jobs stored, lines 5, 7, 8 and 9
/// reported as not loaded (exit 3); returns its standard error.
fn loaded_but_lines_5_7_8_9(o: &std::process::Output, enqueued: u64) -> String {
    no_panic(o);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "lines not loaded: exit 3: {err}");
    assert!(out.contains(&format!("enqueued {enqueued} jobs")), "{out}");
    for n in [5, 7, 8, 9] {
        assert!(err.contains(&format!("line {n}:")), "line {n} reported: {err}");
    }
    err
}

#[tokio::test]
async fn enqueue_ndjson_loads_good_lines_and_reports_bad_ones_by_number() {
    let ctx = Ctx::new("cli-enq").await;
    let input = [
        r#"{"kind":"k","payload":{"a":1}}"#,
        r#"{"kind":"k","payload":2,"id":"fixed","priority":"high","max_attempts":7}"#,
        r#"{"kind":"k","payload":3,"delay":"1h"}"#,
        r#"{"kind":"k","payload":4,"delay":60000,"priority":"low"}"#,
        "not json",
        "",
        r#"{"kind":"k","payload":5,"priority":"urgent"}"#,
        r#"{"kind":"bad kind","payload":6}"#,
        r#"{"kind":"k","payload":7,"extra":1}"#,
    ]
    .join("\n");
    let t0 = ctx.now_ms().await;
    let o = cli(&ctx, &["enqueue", "--queue", &ctx.queue], &input);
    let t1 = ctx.now_ms().await;
    let err = loaded_but_lines_5_7_8_9(&o, 4);
    assert!(!err.contains("line 6:"), "empty lines are skipped: {err}");
    let s = ctx.snapshot().await.by_id();
    assert_eq!(s.ready[0], ["fixed"]);
    assert_eq!(s.ready[1].len(), 1);
    assert!(s.jobs["fixed"].starts_with(r#"{"attempt":0,"max_attempts":7,"priority":0,"#));
    assert!(s.jobs[&s.ready[1][0]].starts_with(r#"{"attempt":0,"max_attempts":5,"priority":1,"#));
    let (hour, minute) = (&s.delayed[1][0], &s.delayed[2][0]);
    check_time("1h delay", NOW + 3_600_000, hour.1, (t0, t1));
    check_time("60000 ms delay", NOW + 60_000, minute.1, (t0, t1));

    // the same lines again, from a file as standard input (read on one thread, unlike the
    // pipe above): bad lines reported by number, the fixed id a duplicate
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &input).unwrap();
    let stdin = Stdio::from(std::fs::File::open(file.path()).unwrap());
    let o = cli_within_from(&ctx, &["enqueue", "--queue", &ctx.queue], stdin, LIMIT);
    let err = loaded_but_lines_5_7_8_9(&o, 3);
    assert!(
        err.contains("skipped 1 duplicate job (a job with the id exists, or the unique key is held): fixed")
    );
    assert_eq!(ctx.snapshot().await.by_id().jobs.len(), 7);
}

#[tokio::test]
async fn enqueue_with_kind_takes_bare_payloads_and_defaults() {
    let ctx = Ctx::new("cli-kind").await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "{\"x\":1}\n2\n\"s\"\n{bad\n").unwrap();
    let path = file.path().to_str().unwrap();
    let args = [
        "enqueue",
        "-q",
        &ctx.queue,
        "--kind",
        "mail",
        "--priority",
        "low",
        "--delay",
        "5m",
        path,
    ];
    let o = cli(&ctx, &args, "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("line 4:"), "{}", text(&o.stderr));
    let s = ctx.snapshot().await.by_id();
    assert_eq!(s.delayed[2].len(), 3);
    assert!(
        s.jobs
            .values()
            .all(|e| e.contains(r#""kind":"mail""#) && e.contains(r#""priority":2,"#))
    );
    assert!(s.jobs.values().any(|e| e.ends_with(r#""payload":{"x":1}}"#)));

    let o = cli(&ctx, &["enqueue", "-q", &ctx.queue, "--kind", "mail"], "1\n2\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(ctx.stats().await.ready[1], 2);
}

/// A read error (a directory given as the file or as standard input, a file the kernel
/// cannot read) stops `weir enqueue` at once with one line and exit 1, instead of reading
/// the same error forever. A file is tried before Redis is reached; standard input as it
/// streams.
#[tokio::test]
async fn enqueue_stops_at_the_first_read_error() {
    let ctx = Ctx::new("cli-readerr").await;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_str().unwrap().to_owned();
    let check = |o: &std::process::Output, name: &str, why: &str| {
        no_panic(o);
        let lines = error_lines(o);
        assert_eq!(o.status.code(), Some(1), "{name}: {lines:?}");
        assert_eq!(lines.len(), 1, "{name}: one line: {lines:?}");
        assert!(
            lines[0].starts_with(&format!("error: cannot read {name}:")) && lines[0].contains(why),
            "{name}: {lines:?}"
        );
    };
    // /proc/self/mem opens, then every read at offset 0 fails (EIO), even for root.
    for (path, why) in [(dir_path.as_str(), "Is a directory"), ("/proc/self/mem", "error")] {
        let o = cli_within(&ctx, &["enqueue", "-q", &ctx.queue, path], LIMIT);
        check(&o, path, why);
    }
    let stdin = Stdio::from(std::fs::File::open(dir.path()).unwrap());
    let o = cli_within_from(&ctx, &["enqueue", "-q", &ctx.queue], stdin, LIMIT);
    check(&o, "standard input", "Is a directory");
    assert!(text(&o.stdout).contains("enqueued 0 jobs"), "{}", text(&o.stdout));
    assert_eq!(ctx.stats().await.pending(), 0);
}

/// Peak resident memory of `weir enqueue FILE` (its VmHWM, read until it exits), in MB,
/// with the exit status.
fn enqueue_peak_mb(ctx: &Ctx, file: &std::path::Path) -> (f64, std::process::ExitStatus) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["enqueue", "-q", &ctx.queue])
        .arg(file)
        .env("REDIS_URL", &ctx.url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    loop {
        // The high-water mark only grows; a zombie's status has none, so read before reaping.
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        peak_kb = peak_kb.max(hwm.unwrap_or(0));
        if let Some(exit) = child.try_wait().unwrap() {
            return (peak_kb as f64 / 1024.0, exit);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `weir enqueue` streams its input: its memory is bounded by the chunks in flight, not
/// by the input's size. Jobs of 64 KiB, 40 MB of input against 160 MB. (From 40 MB on:
/// below that the allocator, mimalloc, is still growing its caches to the size it keeps,
/// about 8 MB more at 80 MB than at 20 MB, and none more from 80 MB to 160 MB.)
#[tokio::test]
async fn enqueue_memory_stays_flat_in_the_input_size() {
    let ctx = Ctx::new("cli-stream").await;
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{{\"kind\":\"k\",\"payload\":\"{}\"}}\n", "x".repeat(64 * 1024));
    let mut peaks = Vec::new();
    let mut stored = 0;
    for mb in [40usize, 160] {
        let path = dir.path().join(format!("{mb}.ndjson"));
        let n = mb * 1_000_000 / line.len();
        std::fs::write(&path, line.repeat(n)).unwrap();
        let (peak, status) = enqueue_peak_mb(&ctx, &path);
        assert!(status.success(), "{mb} MB: {status}");
        stored += n as u64;
        assert_eq!(ctx.stats().await.ready_total(), stored);
        println!("weir enqueue of {mb} MB ({n} jobs of 64 KiB): peak RSS {peak:.1} MB");
        peaks.push(peak);
        std::fs::remove_file(&path).unwrap();
    }
    let (small, large) = (peaks[0], peaks[1]);
    // Held whole, 160 MB of input would take more than 160 MB. (mimalloc keeps more
    // than glibc's malloc did: about 53 MB here against 39 MB.)
    assert!(
        large < 80.0,
        "160 MB of input held in {large:.1} MB: not streamed"
    );
    assert!(
        large < small + 10.0,
        "peak grows with the input: {small:.1} MB for 40 MB, {large:.1} MB for 160 MB"
    );
    // Free the test server's memory for the other tests.
    let _: i64 = ctx
        .cmd(&["DEL", ctx.keys.jobs(), ctx.keys.ready(weir::Priority::Normal)])
        .await;
}

#[tokio::test]
async fn unique_for_skips_keys_enqueued_within_the_window_from_the_flag_or_the_line() {
    let ctx = Ctx::new("cli-uniq").await;
    let input = [
        r#"{"kind":"k","payload":1,"unique_key":"order-1"}"#,
        r#"{"kind":"k","payload":2,"unique_key":"order-1"}"#,
        r#"{"kind":"k","payload":3,"id":"order-2"}"#,
        r#"{"kind":"k","payload":4,"id":"x","unique_key":"order-2","unique_for":60000}"#,
        r#"{"kind":"k","payload":5,"unique_key":"bad key"}"#,
    ]
    .join("\n");
    let o = cli(
        &ctx,
        &["enqueue", "--queue", &ctx.queue, "--unique-for", "1h"],
        &input,
    );
    no_panic(&o);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(out.contains("enqueued 2 jobs"), "{out}");
    assert!(err.contains("skipped 2 duplicate jobs"), "{err}");
    assert!(err.contains("line 5: invalid unique key \"bad key\""), "{err}");
    let s = ctx.snapshot().await.by_id();
    assert_eq!(s.unique.len(), 2, "{:?}", s.unique);
    assert_eq!(s.unique["order-2"], "order-2");
    let o = cli(
        &ctx,
        &["enqueue", "--queue", &ctx.queue],
        r#"{"kind":"k","payload":1,"unique_for":"1h","unique_key":"order-1"}"#,
    );
    assert!(
        text(&o.stderr).contains("skipped 1 duplicate job ("),
        "{}",
        text(&o.stderr)
    );
}

/// A line's `key` lands in the envelope after `unique_key` and before `payload`, and
/// `weir job show` shows it; `--key` is the default for lines without one (and for
/// `--kind`'s bare payloads); a bad key is a bad line, named by its number, the other
/// lines loaded; a bad `--key` is a usage error before anything is read.
#[tokio::test]
async fn a_lines_key_or_the_flags_lands_in_the_envelope() {
    let ctx = Ctx::new("cli-key").await;
    let q = ctx.queue.as_str();
    let input = [
        r#"{"kind":"k","payload":{"key":"in the payload"},"id":"a","key":"tenant-1","unique_for":"1h"}"#,
        r#"{"kind":"k","payload":2,"id":"b"}"#,
        r#"{"kind":"k","payload":3,"id":"c","key":"bad key"}"#,
        r#"{"kind":"k","payload":4,"id":"d","key":""}"#,
    ]
    .join("\n");
    let o = cli(&ctx, &["enqueue", "-q", q, "--key", "acme.eu:1"], &input);
    no_panic(&o);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(text(&o.stdout).contains("enqueued 2 jobs"), "{}", text(&o.stdout));
    assert_eq!(
        error_lines(&o),
        [
            r#"line 3: invalid job key "bad key": use 1 to 128 characters from A-Z a-z 0-9 _ . : -"#,
            r#"line 4: invalid job key "": use 1 to 128 characters from A-Z a-z 0-9 _ . : -"#,
            "2 lines not loaded",
        ],
        "{err}"
    );
    let s = ctx.snapshot().await.by_id();
    assert_eq!(s.jobs.len(), 2, "{:?}", s.jobs);
    assert!(
        s.jobs["a"].ends_with(
            r#","kind":"k","unique_key":"a","key":"tenant-1","payload":{"key":"in the payload"}}"#
        ),
        "{}",
        s.jobs["a"]
    );
    assert!(
        s.jobs["b"].ends_with(r#","kind":"k","key":"acme.eu:1","payload":2}"#),
        "{}",
        s.jobs["b"]
    );

    let o = cli(&ctx, &["job", "show", "a", "--json", "-q", q], "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["envelope"]["key"], "tenant-1");
    let out = text(&cli(&ctx, &["job", "show", "b", "-q", q], "").stdout);
    assert!(
        out.lines().any(|l| l.split_whitespace().eq(["key", "acme.eu:1"])),
        "{out}"
    );

    // --kind: every bare payload takes --key; none without it
    let o = cli(
        &ctx,
        &["enqueue", "-q", q, "--kind", "m", "--key", "host-9"],
        "10\n11\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = cli(&ctx, &["enqueue", "-q", q, "--kind", "m"], "12\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let s = ctx.snapshot().await.by_id();
    let m: Vec<&String> = s.jobs.values().filter(|e| e.contains(r#""kind":"m""#)).collect();
    assert_eq!(m.len(), 3);
    for e in m {
        let want = if e.ends_with(r#""payload":12}"#) {
            ""
        } else {
            r#","key":"host-9""#
        };
        assert!(e.contains(&format!(r#""kind":"m"{want},"payload":"#)), "{e}");
    }

    let o = cli(&ctx, &["enqueue", "-q", q, "--key", "a/b"], "");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(r#"invalid job key "a/b""#),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(ctx.snapshot().await.by_id().jobs.len(), 5, "nothing more stored");
}

/// Redis full (`maxmemory` reached, policy `noeviction`): `weir enqueue` of 200,000 lines
/// stops at the first chunk refused for memory, sends each refused chunk once (no retries
/// with backoff), and says in one line how many jobs are stored, why, and what to do.
#[tokio::test]
async fn enqueue_refused_for_memory_stops_with_one_line() {
    let ctx = Ctx::private("cli-oom").await;
    let info: String = ctx.cmd(&["INFO", "memory"]).await;
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let max = (used + 4_000_000).to_string();
    let _: () = ctx
        .cmd(&[
            "CONFIG",
            "SET",
            "maxmemory",
            &max,
            "maxmemory-policy",
            "noeviction",
        ])
        .await;
    let file = tempfile::NamedTempFile::new().unwrap();
    let line = format!("\"{}\"\n", "x".repeat(200));
    std::fs::write(file.path(), line.repeat(200_000)).unwrap();
    let path = file.path().to_str().unwrap();
    let o = cli_within(
        &ctx,
        &["enqueue", "--queue", &ctx.queue, "--kind", "k", path],
        LIMIT,
    );
    no_panic(&o);
    let stored = ctx.stats().await.ready_total();
    assert!(stored > 0 && stored < 200_000, "{stored}");
    let lines = error_lines(&o);
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(lines[0].contains("out of memory"), "{lines:?}");
    assert!(lines[0].contains(&format!("{stored} jobs stored")), "{lines:?}");
    assert!(lines[0].contains("raise maxmemory"), "{lines:?}");
    assert_eq!(o.status.code(), Some(3), "lines not loaded: exit 3");
    // Each refused chunk was sent once: the chunks in flight, and the one being gathered.
    let info: String = ctx.cmd(&["INFO", "errorstats"]).await;
    let refused: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("errorstat_EXECABORT:count="))
        .map_or(0, |n| n.trim().parse().unwrap());
    assert!(
        refused <= weir::queue::producer::BULK_PIPELINE as u64 + 1,
        "{refused} refused calls"
    );
}

/// A load of plain lines (a kind and a payload, which `weir enqueue` encodes without
/// building a job per line) over several chunks, with bad lines among them: every bad
/// line is reported by its number, every good line is stored once, in the input's order,
/// and the counts add up to the input.
#[tokio::test]
async fn plain_lines_load_in_order_and_bad_ones_are_reported_by_number() {
    let ctx = Ctx::new("cli-plain").await;
    let n = 2_500;
    let bad: [(usize, Vec<u8>); 7] = [
        (3, br#"{"kind":"k","payload":{"n":3,}}"#.to_vec()),
        (500, br#"{"kind":"bad kind","payload":{"n":500}}"#.to_vec()),
        // Longer than the limit: skipped as it is read.
        (
            1000,
            format!(r#"{{"kind":"k","payload":"{}"}}"#, "x".repeat(5000)).into_bytes(),
        ),
        // Not UTF-8.
        (1001, b"{\"kind\":\"k\",\"payload\":\"\xff\"}".to_vec()),
        // Within the limit as a line, over it as an envelope (the header adds ~115 bytes).
        (
            1500,
            format!(r#"{{"kind":"k","payload":"{}"}}"#, "x".repeat(4000)).into_bytes(),
        ),
        (1777, br#"{"kind":"k","payload":{"n":1777}} x"#.to_vec()),
        (2500, br#"{"kind":"k"}"#.to_vec()),
    ];
    let mut input = Vec::new();
    for i in 1..=n {
        match bad.iter().find(|(b, _)| *b == i) {
            Some((_, l)) => input.extend_from_slice(l),
            None => input.extend_from_slice(format!(r#"{{"kind":"k","payload":{{"n":{i}}}}}"#).as_bytes()),
        }
        input.push(b'\n');
    }
    let o = cli(
        &ctx,
        &["enqueue", "-q", &ctx.queue, "--max-envelope-bytes", "4096"],
        &input,
    );
    no_panic(&o);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "lines not loaded: exit 3: {err}");
    let good = n - bad.len();
    assert!(
        text(&o.stdout).contains(&format!("enqueued {good} jobs")),
        "{}",
        text(&o.stdout)
    );
    let reported: Vec<&str> = err.lines().filter(|l| l.starts_with("line ")).collect();
    assert_eq!(reported.len(), bad.len(), "one report per bad line: {err}");
    for ((i, _), line) in bad.iter().zip(&reported) {
        assert!(
            line.starts_with(&format!("line {i}: ")),
            "line {i} reported: {err}"
        );
    }
    assert!(err.contains(&format!("{} lines not loaded", bad.len())), "{err}");
    let s = ctx.snapshot().await;
    let stored: Vec<usize> = s.ready[1]
        .iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e).unwrap();
            assert_eq!(v["kind"], "k", "{e}");
            v["payload"]["n"].as_u64().unwrap() as usize
        })
        .collect();
    let expected: Vec<usize> = (1..=n).filter(|i| bad.iter().all(|(b, _)| b != i)).collect();
    assert_eq!(stored, expected, "each good line once, in order");
}

/// A plain line and the same job given with a field that takes the full path (a line's
/// `priority`, equal to `--priority`) make the same envelope, but for the id and the
/// time: the run's options (`--priority`, `--key`, `--max-attempts`) reach both alike,
/// and `--kind`'s bare payloads too.
#[tokio::test]
async fn plain_lines_make_the_envelopes_full_lines_make() {
    let ctx = Ctx::new("cli-plain-env").await;
    let q = ctx.queue.as_str();
    let input = [
        r#"{"kind":"k","payload":{"a":[1,2,{"b":"c\"d"}]}}"#,
        r#"{"kind":"k","payload":{"a":[1,2,{"b":"c\"d"}]},"priority":"high"}"#,
    ]
    .join("\n");
    let args = [
        "enqueue",
        "-q",
        q,
        "--priority",
        "high",
        "--key",
        "t-1",
        "--max-attempts",
        "3",
    ];
    let o = cli(&ctx, &args, &input);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = cli(
        &ctx,
        &[&args[..], &["--kind", "k"]].concat(),
        r#"{"a":[1,2,{"b":"c\"d"}]}"#,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let s = ctx.snapshot().await;
    let shapes: Vec<String> = s.ready[0]
        .iter()
        .map(|e| {
            // All but the enqueue time and the id, which differ from job to job.
            let (head, _) = e.split_once(r#","enqueued_at":"#).unwrap();
            let (_, tail) = e.split_once(r#","kind":"#).unwrap();
            format!("{head} .. {tail}")
        })
        .collect();
    assert_eq!(shapes.len(), 3, "{:?}", s.ready);
    assert_eq!(shapes[0], shapes[1]);
    assert_eq!(shapes[0], shapes[2]);
    assert!(
        s.ready[0][0].starts_with(r#"{"attempt":0,"max_attempts":3,"priority":0,"#)
            && s.ready[0][0].ends_with(r#","kind":"k","key":"t-1","payload":{"a":[1,2,{"b":"c\"d"}]}}"#),
        "{}",
        s.ready[0][0]
    );
}

/// Plain lines (written in bulk) and lines that take the full path (an id of their own)
/// interleaved: alone among plain ones, every seventh line, and in a run of 1,200 (over a
/// chunk's worth), with a duplicate id among them. Every job is stored once (chunks in
/// flight land in any order), each id'd line under its id, and the duplicate is reported.
#[tokio::test]
async fn plain_and_full_lines_interleaved_load_once_each() {
    let ctx = Ctx::new("cli-interleaved").await;
    let n = 4_000;
    let has_id = |i: usize| i.is_multiple_of(7) || (1_500..2_700).contains(&i) || i == 3_999;
    let mut input = String::new();
    for i in 1..=n {
        let line = match i {
            // The id of line 14 again: a duplicate.
            3_999 => r#"{"kind":"k","payload":{"n":3999},"id":"j-14"}"#.to_owned(),
            i if has_id(i) => format!(r#"{{"kind":"k","payload":{{"n":{i}}},"id":"j-{i}"}}"#),
            i => format!(r#"{{"kind":"k","payload":{{"n":{i}}}}}"#),
        };
        input.push_str(&line);
        input.push('\n');
    }
    let o = cli(&ctx, &["enqueue", "-q", &ctx.queue], &input);
    no_panic(&o);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "a duplicate is not a failure: {err}");
    assert!(out.contains(&format!("enqueued {} jobs", n - 1)), "{out}");
    assert!(
        err.contains("skipped 1 duplicate job") && err.contains("j-14"),
        "{err}"
    );
    let s = ctx.snapshot().await;
    let stored: Vec<(usize, String)> = s.ready[1]
        .iter()
        .map(|item| {
            // A job with an id of its own is stored by id, its envelope in the jobs hash.
            let e = s.jobs.get(item).unwrap_or(item);
            let v: serde_json::Value = serde_json::from_str(e).unwrap();
            (
                v["payload"]["n"].as_u64().unwrap() as usize,
                v["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut lines: Vec<usize> = stored.iter().map(|(i, _)| *i).collect();
    lines.sort_unstable();
    let expected: Vec<usize> = (1..=n).filter(|i| *i != 3_999).collect();
    assert!(
        lines == expected,
        "each job but the duplicate, once: {} stored",
        lines.len()
    );
    for (i, id) in &stored {
        assert_eq!(id == &format!("j-{i}"), has_id(*i), "line {i}: id {id}");
    }
}
