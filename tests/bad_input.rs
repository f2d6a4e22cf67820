//! Bad input never crashes a consumer and is never lost: a corpus of malformed envelopes,
//! pushed straight into Redis between good jobs, is dead-lettered one by one with a reason
//! (an unknown kind or an envelope over the size limit after a short grace, in case
//! another consumer can take it) while the good jobs are processed; and the envelope
//! decoder never panics on arbitrary bytes (proptest).

mod faults;

use proptest::prelude::*;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::queue::keys::QueueKeys;
use weir::{
    CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Priority, Redis, Registry, handler_fn,
};

/// A well-formed envelope as weir writes it, with `payload` spliced in verbatim.
fn envelope(id: &str, kind: &str, payload: &str) -> Vec<u8> {
    format!(
        r#"{{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":1700000000000,"id":"{id}","kind":"{kind}","payload":{payload}}}"#
    )
    .into_bytes()
}

/// (id, envelope bytes, a word the dead-letter reason must contain).
fn corpus() -> Vec<(String, Vec<u8>, &'static str)> {
    let mut c: Vec<(String, Vec<u8>, &'static str)> = Vec::new();
    let mut add =
        |name: &str, bytes: Vec<u8>, reason: &'static str| c.push((format!("bad-{name}"), bytes, reason));
    add("not-json", b"hello, world".to_vec(), "undecodable");
    add("empty", Vec::new(), "undecodable");
    add("null", b"null".to_vec(), "undecodable");
    add("array", b"[1,2,3]".to_vec(), "undecodable");
    let full = envelope("bad-truncated", "good", r#"{"n":1}"#);
    add("truncated", full[..full.len() / 2].to_vec(), "undecodable");
    add(
        "wrong-types",
        br#"{"attempt":"zero","max_attempts":3,"priority":1,"enqueued_at":0,"id":"bad-wrong-types","kind":"good","payload":{}}"#.to_vec(),
        "undecodable",
    );
    add(
        "negative-attempt",
        br#"{"attempt":-1,"max_attempts":3,"priority":1,"enqueued_at":0,"id":"bad-negative-attempt","kind":"good","payload":{}}"#.to_vec(),
        "undecodable",
    );
    add(
        "huge-number",
        br#"{"attempt":1e300,"max_attempts":3,"priority":1,"enqueued_at":0,"id":"bad-huge-number","kind":"good","payload":{}}"#.to_vec(),
        "undecodable",
    );
    add(
        "missing-fields",
        br#"{"attempt":0,"id":"bad-missing-fields"}"#.to_vec(),
        "undecodable",
    );
    add(
        "missing-payload",
        br#"{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":0,"id":"bad-missing-payload","kind":"good"}"#.to_vec(),
        "undecodable",
    );
    add(
        "duplicate-field",
        br#"{"attempt":0,"attempt":1,"max_attempts":3,"priority":1,"enqueued_at":0,"id":"bad-duplicate-field","kind":"good","payload":{}}"#.to_vec(),
        "undecodable",
    );
    let mut utf8 = envelope("bad-invalid-utf8", "good", "\"xx\"");
    let at = utf8.len() - 3;
    utf8[at] = 0xff;
    utf8[at + 1] = 0xfe;
    add("invalid-utf8", utf8, "undecodable");
    let mut nul = envelope("bad-nul", "good", "\"a\"");
    nul.insert(1, 0);
    add("nul", nul, "undecodable");
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(envelope("bad-bom", "good", "{}"));
    add("bom", bom, "undecodable");
    let mut trailing = envelope("bad-trailing", "good", "{}");
    trailing.extend_from_slice(b" garbage");
    add("trailing", trailing, "undecodable");
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    add(
        "deeply-nested",
        envelope("bad-deeply-nested", "good", &deep),
        "undecodable",
    );
    let big = format!("\"{}\"", "x".repeat(10 << 20));
    add("10mb", envelope("bad-10mb", "good", &big), "exceeds the limit");
    add(
        "unknown-kind",
        envelope("bad-unknown-kind", "nobody-handles-this", "{}"),
        "unknown job kind",
    );
    add(
        "id-mismatch",
        envelope("someone-else", "good", "{}"),
        "does not match",
    );
    add(
        "bad-payload",
        envelope("bad-bad-payload", "good", "{"),
        "undecodable",
    );
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_envelopes_are_dead_lettered_and_good_jobs_processed() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    let q = "bad-input";
    let keys = QueueKeys::new(q).unwrap();
    let mut conn = faults::raw(&url).await;
    let corpus = corpus();
    // Good jobs before, between and after the bad ones, all on the normal ready list.
    let mut order = Vec::new();
    let mut good = 0;
    for (i, (id, bytes, _)) in corpus.iter().enumerate() {
        for _ in 0..5 {
            let gid = format!("good-{good}");
            let env = envelope(&gid, "good", &format!("{{\"n\":{good}}}"));
            let _: () = conn.hset(keys.jobs(), &gid, env).await.unwrap();
            order.push(gid);
            good += 1;
        }
        let _: () = conn.hset(keys.jobs(), id, bytes.as_slice()).await.unwrap();
        order.push(id.clone());
        if i == 3 {
            // An id whose envelope is gone (purged meanwhile): skipped, not fatal.
            order.push("dangling".into());
        }
    }
    for chunk in order.chunks(100) {
        let _: () = conn.rpush(keys.ready(Priority::Normal), chunk).await.unwrap();
    }

    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let s = seen.clone();
    let registry = Registry::new().on(
        "good",
        handler_fn(move |job| {
            let s = s.clone();
            async move {
                *s.lock().unwrap().entry(job.id).or_insert(0) += 1;
                Ok(())
            }
        }),
    );
    let mut config = ConsumerConfig::new(q);
    config.concurrency = 8;
    config.drain = true;
    config.metrics = false;
    config.fetcher.batch = 7; // several fetches, bad and good envelopes in each
    // An unknown kind or an envelope over the size limit waits this long for a consumer
    // that can take it before it is dead-lettered.
    config.pool.unknown_kind_grace = Duration::from_millis(300);
    let consumer = Consumer::new(config, Redis::open(&url).unwrap(), registry).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(60), consumer.run(CancellationToken::new()))
        .await
        .expect("consumer drained in time")
        .unwrap();

    let seen = seen.lock().unwrap().clone();
    let odd: Vec<_> = seen.keys().filter(|k| !k.starts_with("good-")).collect();
    assert!(odd.is_empty(), "bad envelopes ran: {odd:?}");
    assert_eq!(seen.len(), good, "every good job ran");
    assert!(seen.values().all(|&n| n == 1), "no good job ran twice");
    assert_eq!(report.dead as usize, corpus.len(), "{report:?}");

    let queue = faults::queue(&url, q).await;
    let dead = queue.dead_jobs(0, 1000).await.unwrap();
    let reasons: HashMap<&str, &str> = dead
        .iter()
        .map(|d| (d.id.as_str(), d.reason.as_deref().unwrap_or("")))
        .collect();
    for (id, _, want) in &corpus {
        let reason = reasons
            .get(id.as_str())
            .unwrap_or_else(|| panic!("{id} not dead-lettered: {reasons:?}"));
        assert!(reason.contains(want), "{id}: reason {reason:?} lacks {want:?}");
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.pending(), stats.dead as usize),
        (0, corpus.len()),
        "{stats:?}"
    );
    println!(
        "bad inputs tried: {}, dead-lettered with a reason: {}, good jobs processed: {}",
        corpus.len(),
        dead.len(),
        seen.len()
    );
}

/// An id with a newline, pushed by hand among inline and stored jobs, cannot be named in a
/// fetch's reply (one line per job): the fetch dead-letters it with the reason, and its
/// batch-mates are paired with their own leases, so each runs once and is acked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_with_a_newline_is_dead_lettered_and_its_batch_mates_run_once() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    let q = "newline-id";
    let keys = QueueKeys::new(q).unwrap();
    let producer = weir::Producer::new(Redis::open(&url).unwrap().connect().await.unwrap(), q).unwrap();
    let job = |i: usize| weir::NewJob::new("good", &serde_json::json!({ "n": i })).unwrap();
    // Inline jobs (generated ids), the bad id, more inline jobs and stored ones.
    producer.enqueue_bulk((0..3).map(job)).await.unwrap();
    let mut conn = faults::raw(&url).await;
    let bad = "bad\nid";
    let _: () = conn
        .hset(keys.jobs(), bad, envelope("bad-id", "good", "{}"))
        .await
        .unwrap();
    let _: () = conn.rpush(keys.ready(Priority::Normal), bad).await.unwrap();
    producer.enqueue_bulk((3..6).map(job)).await.unwrap();
    producer
        .enqueue_bulk((6..9).map(|i| job(i).id(format!("stored-{i}"))))
        .await
        .unwrap();

    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let s = seen.clone();
    let registry = Registry::new().on(
        "good",
        handler_fn(move |job| {
            let s = s.clone();
            async move {
                *s.lock().unwrap().entry(job.id).or_insert(0) += 1;
                Ok(())
            }
        }),
    );
    let mut config = ConsumerConfig::new(q);
    config.drain = true;
    config.metrics = false;
    // A lease missed by a wrong pairing would come back (and run again) this soon.
    config.lease = Duration::from_millis(300);
    let consumer = Consumer::new(config, Redis::open(&url).unwrap(), registry).unwrap();
    tokio::time::timeout(Duration::from_secs(60), consumer.run(CancellationToken::new()))
        .await
        .expect("consumer drained in time")
        .unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 9, "every batch-mate ran: {seen:?}");
    assert!(seen.values().all(|&n| n == 1), "a batch-mate ran twice: {seen:?}");
    let queue = faults::queue(&url, q).await;
    let dead = queue.dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].id, bad);
    assert_eq!(dead[0].reason.as_deref(), Some("invalid id: contains a newline"));
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.pending(), stats.dead, stats.in_flight),
        (0, 1, 0),
        "{stats:?}"
    );
}

fn valid() -> Vec<u8> {
    envelope("j1", "good", r#"{"to":"a@b.c","n":[1,2,{"x":null}]}"#)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary bytes: an error or a job, never a panic.
    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = weir::queue::envelope::decode("j1", &bytes, 1 << 20);
    }

    /// A valid envelope with bytes overwritten, inserted or cut: never a panic, and a job
    /// that does decode carries the id it is stored under.
    #[test]
    fn decode_never_panics_on_mutated_envelopes(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8),
        cut in any::<usize>(),
    ) {
        let mut b = valid();
        for (at, byte, op) in edits {
            let at = at % (b.len() + 1);
            match op {
                0 if at < b.len() => b[at] = byte,
                1 => b.insert(at, byte),
                _ if at < b.len() => { b.remove(at); }
                _ => {}
            }
        }
        b.truncate(b.len() - cut % (b.len() / 4 + 1));
        if let Ok(job) = weir::queue::envelope::decode("j1", &b, 1 << 20) {
            prop_assert_eq!(job.id, "j1");
        }
    }

    /// Any size limit is honoured exactly.
    #[test]
    fn decode_honours_the_size_limit(limit in 0usize..200) {
        let b = valid();
        let r = weir::queue::envelope::decode("j1", &b, limit);
        prop_assert_eq!(r.is_ok(), b.len() <= limit);
    }
}
