//! Network faults between weir and Redis, through the TCP fault proxy: every connection
//! dropped, the link stalled past the response timeout, a reply cut in half. Under a
//! stream of such faults a consumer keeps going, no job is lost, and nothing panics.

mod common;
mod faults;

use faults::proxy::Proxy;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir::{CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Redis, Registry, handler_fn};

const JOBS: usize = 6_000;
const QUEUE: &str = "proxy-faults";

static PANICS: AtomicUsize = AtomicUsize::new(0);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_stalled_and_cut_connections_lose_no_job() {
    // Panics anywhere in this test binary count: the other test panics only when it fails.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let _ = tracing_subscriber::fmt()
        .with_env_filter("weir=info")
        .with_test_writer()
        .try_init();
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    faults::enqueue_range(&redis.url(), QUEUE, "k", "job", 0, JOBS).await;

    let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let r = runs.clone();
    let registry = Registry::new().fallback(handler_fn(move |job| {
        let r = r.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            *r.lock().unwrap().entry(job.id).or_insert(0) += 1;
            Ok(())
        }
    }));
    let mut config = ConsumerConfig::new(QUEUE);
    config.concurrency = 8;
    config.drain = true;
    config.metrics = false;
    config.fetcher.batch = 50;
    config.lease = Duration::from_secs(1);
    config.reclaimer.interval = Duration::from_millis(200);
    // Stalls of 700 ms outlast this, so calls time out and are retried.
    let via_proxy = Redis::open(&proxy.url())
        .unwrap()
        .response_timeout(Duration::from_millis(300));
    let consumer = Consumer::new(config, via_proxy, registry).unwrap();
    let run = tokio::spawn(consumer.run(CancellationToken::new()));

    let started = Instant::now();
    let mut kinds = [0usize; 4];
    let mut i = 0;
    while !run.is_finished() && i < 60 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(150 + (i as u64 * 37) % 200)).await;
        match i % 4 {
            0 => proxy.drop_all(),
            1 => {
                proxy.stall(true);
                tokio::time::sleep(Duration::from_millis(700)).await;
                proxy.stall(false);
            }
            2 => {
                proxy.cut_next_reply();
                common::try_wait_until(Duration::from_secs(3), || async { proxy.cut_done() }).await;
            }
            _ => {
                proxy.stall(true);
                tokio::time::sleep(Duration::from_millis(100)).await;
                proxy.stall(false);
            }
        }
        kinds[i % 4] += 1;
        i += 1;
    }
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the consumer drains the queue after the faults")
        .expect("the consumer task did not panic")
        .expect("the consumer returned no error");

    let runs = runs.lock().unwrap().clone();
    let missing = (0..JOBS)
        .filter(|i| !runs.contains_key(&format!("job-{i}")))
        .count();
    let dups = runs.values().filter(|n| **n > 1).count();
    let stats = faults::queue(&redis.url(), QUEUE).await.stats().await.unwrap();
    assert_eq!(missing, 0, "jobs never ran");
    assert_eq!((stats.pending(), stats.dead), (0, 0), "{stats:?}");
    // a settle whose reply was cut is retried and applied once: the consumer counts what
    // Redis counted (the outcomes of leases lost to the stalls, in neither)
    assert_eq!(
        Some(&report.acked),
        stats.counters.get("acked"),
        "the consumer's acks against Redis's: {report:?}"
    );
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a panic happened");
    let c = proxy.counts();
    println!(
        "proxy faults survived: {i} ({} drop-all, {} long stalls past the 300ms response timeout, {} cut replies, {} short stalls); \
         connections accepted {}, dropped {}, replies cut {}; jobs {JOBS}, lost {missing}, run twice {dups}; {report:?}",
        kinds[0],
        kinds[1],
        kinds[2],
        kinds[3],
        c.accepted.load(Ordering::Relaxed),
        c.dropped.load(Ordering::Relaxed),
        c.cut.load(Ordering::Relaxed),
    );
    assert!(c.cut.load(Ordering::Relaxed) > 0 && c.dropped.load(Ordering::Relaxed) > 0);
}

/// A network path that dies silently (no reset, no close): every call on the old
/// connections times out. The consumer must get off them and finish on new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_connection_is_replaced() {
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "blackhole";
    faults::enqueue_range(&redis.url(), queue, "k", "job", 0, 2_000).await;
    let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let r = runs.clone();
    let registry = Registry::new().fallback(handler_fn(move |job| {
        let r = r.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            *r.lock().unwrap().entry(job.id).or_insert(0) += 1;
            Ok(())
        }
    }));
    let mut config = ConsumerConfig::new(queue);
    config.concurrency = 8;
    config.drain = true;
    config.metrics = false;
    config.fetcher.batch = 50;
    config.lease = Duration::from_secs(1);
    config.reclaimer.interval = Duration::from_millis(200);
    let via_proxy = Redis::open(&proxy.url())
        .unwrap()
        .response_timeout(Duration::from_millis(300));
    let consumer = Consumer::new(config, via_proxy, registry).unwrap();
    let run = tokio::spawn(consumer.run(CancellationToken::new()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.blackhole_open_connections();
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the consumer gets off the dead connection and drains the queue")
        .unwrap()
        .unwrap();
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 2_000, "{report:?}");
    let stats = faults::queue(&redis.url(), queue).await.stats().await.unwrap();
    assert_eq!(stats.pending(), 0, "{stats:?}");
}

/// `weir enqueue` through the proxy, fed in steps: a reply cut in half and every
/// connection dropped while it loads. Failed chunks are retried, so every line is loaded
/// once and the exit code is 0: lines with ids of their own (the enqueue script's chunks)
/// and plain lines (generated ids, written in bulk, each chunk's call marked by a token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_rides_out_dropped_connections_and_cut_replies() {
    enqueue_under_faults(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_of_plain_lines_rides_out_dropped_connections_and_cut_replies() {
    enqueue_under_faults(false).await;
}

async fn enqueue_under_faults(with_ids: bool) {
    use std::io::Write;
    const LINES: usize = 14_000;
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = faults::queue(&redis.url(), "enqueue-faults").await;
    let mut child = std::process::Command::new(faults::WEIR)
        .args(["enqueue", "--redis-url", &proxy.url(), "-q", "enqueue-faults"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A writer thread feeds standard input, so the test never blocks on a full pipe while
    // the proxy stalls the consumer of that pipe.
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, usize)>();
    let writer = std::thread::spawn(move || {
        for (from, to) in rx {
            let lines: String = (from..to)
                .map(|i| match with_ids {
                    true => format!("{{\"kind\":\"a\",\"payload\":{i},\"id\":\"line-{i}\"}}\n"),
                    false => format!("{{\"kind\":\"a\",\"payload\":{i}}}\n"),
                })
                .collect();
            stdin.write_all(lines.as_bytes()).unwrap();
            stdin.flush().unwrap();
        }
    });
    let feed = |from: usize, to: usize| tx.send((from, to)).unwrap();
    let stored = |n: u64| {
        let queue = queue.clone();
        move || {
            let queue = queue.clone();
            async move { queue.stats().await.unwrap().ready_total() >= n }
        }
    };
    // Chunks of 1,000 lines, four in flight: what is sent depends on what was fed.
    feed(0, 4000);
    common::wait_until("the first chunk stored", Duration::from_secs(30), stored(1000)).await;
    let accepted = || proxy.counts().accepted.load(Ordering::Relaxed);
    let before_cut = accepted();
    proxy.cut_next_reply();
    feed(4000, 8000);
    common::wait_until("a reply cut", Duration::from_secs(30), || async {
        proxy.cut_done()
    })
    .await;
    // The cut chunk's retry opens a new connection: the drop below finds one to drop.
    common::wait_until("a connection after the cut", Duration::from_secs(30), || async {
        accepted() > before_cut
    })
    .await;
    proxy.stall(true);
    feed(8000, 10_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // (a drop while no connection is open would test nothing)
    common::wait_until("a connection open to drop", Duration::from_secs(30), || async {
        proxy.open() > 0
    })
    .await;
    proxy.drop_all();
    proxy.stall(false);
    feed(10_000, LINES);
    drop(tx);
    writer.join().unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        stats.ready_total(),
        LINES as u64,
        "every line loaded once\n{stdout}\n{stderr}"
    );
    let c = proxy.counts();
    let (cut, dropped) = (c.cut.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed));
    assert!(cut == 1 && dropped >= 1, "cut {cut}, dropped {dropped}");
    println!("enqueue under faults (ids: {with_ids}): {LINES} lines loaded; {stdout}{stderr}");
}

/// A consumer through `proxy`, draining `queue` with a no-op handler.
fn draining(proxy: &Proxy, queue: &str) -> Consumer {
    let mut config = ConsumerConfig::new(queue);
    config.drain = true;
    config.metrics = false;
    let registry = Registry::new().fallback(handler_fn(|_| async { Ok(()) }));
    Consumer::new(config, Redis::open(&proxy.url()).unwrap(), registry).unwrap()
}

/// The reply to a call the consumer makes as it starts (its check of the Functions
/// library) lost and its connection closed: the start is retried as any later call is,
/// and the consumer drains the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_while_starting_is_retried() {
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "starting";
    faults::enqueue_range(&redis.url(), queue, "k", "job", 0, 200).await;
    proxy.lose_reply_to(b"weir_version");
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        draining(&proxy, queue).run(CancellationToken::new()),
    )
    .await
    .expect("the consumer starts and drains the queue")
    .expect("the consumer returned no error");
    assert!(proxy.reply_lost(), "the library check's reply was lost");
    assert_eq!(report.acked, 200, "{report:?}");
}

/// The reply to the start's eviction check lost: the check is made again, not skipped, so
/// a Redis that may evict queue keys still stops the consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_check_whose_reply_is_lost_is_made_again() {
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "evicting";
    faults::enqueue_range(&redis.url(), queue, "k", "job", 0, 10).await;
    let mut c = Redis::open(&redis.url()).unwrap().connect().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory-policy", "allkeys-lru"])
        .query_async(&mut c)
        .await
        .unwrap();
    proxy.lose_reply_to(b"$6\r\nmemory\r\n");
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        draining(&proxy, queue).run(CancellationToken::new()),
    )
    .await
    .expect("the consumer stops");
    assert!(proxy.reply_lost(), "the eviction check's reply was lost");
    assert!(matches!(r, Err(weir::Error::Eviction { .. })), "{r:?}");
}

/// The reply to a heartbeat is lost (Redis extended the leases; the consumer never heard
/// back): the leases still belong to their holder. Its next beat extends them again, and
/// its settle calls still hold them, so each job runs once and is acked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_extend_reply_leaves_the_leases_with_their_holder() {
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "lost-extend";
    faults::enqueue_range(&redis.url(), queue, "k", "job", 0, 4).await;
    faults::load_script(&redis.url(), "extend").await;
    proxy.lose_reply_to(&faults::script_sha("extend"));
    let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let r = runs.clone();
    // Each job runs 2.5 leases: it needs the heartbeat.
    let registry = Registry::new().fallback(handler_fn(move |job| {
        let r = r.clone();
        async move {
            *r.lock().unwrap().entry(job.id).or_insert(0) += 1;
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            Ok(())
        }
    }));
    let mut config = ConsumerConfig::new(queue);
    config.concurrency = 4;
    config.drain = true;
    config.metrics = false;
    config.lease = Duration::from_secs(1);
    config.reclaimer.interval = Duration::from_millis(100);
    let consumer = Consumer::new(config, Redis::open(&proxy.url()).unwrap(), registry).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(60), consumer.run(CancellationToken::new()))
        .await
        .expect("the consumer drains the queue")
        .unwrap();
    assert!(proxy.reply_lost(), "the proxy lost an extend reply");
    let runs = runs.lock().unwrap().clone();
    let stats = faults::queue(&redis.url(), queue).await.stats().await.unwrap();
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(
        runs.values().all(|n| *n == 1),
        "a job ran twice: {runs:?}; {stats:?}"
    );
    assert_eq!((report.acked, report.lost_leases), (4, 0), "{report:?}");
    assert_eq!(stats.counters.get("reclaimed"), None, "{stats:?}");
    assert_eq!(stats.counters.get("acked"), Some(&4), "{stats:?}");
}

/// Redis slow to answer (every reply delayed 20 ms) and settles written ten outcomes at a
/// time, while fetches bring up to 50 jobs a call: settles fall behind. Fetching slows to
/// their pace: the leases held (in Redis, and in the consumer's table) stay under the cap
/// the buffer, the running jobs and two settle calls' worth of outcomes set, and the
/// outcomes waiting in memory under the channel's capacity plus one call's worth and one
/// wave from the pool, rather than growing with the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_settles_slow_fetching_and_memory_stays_bounded() {
    const JOBS: usize = 3_000;
    const LIMIT: usize = 32;
    const FLUSH: usize = 10;
    // The buffer (the free slots, and what the pool runs during a fetch's round trip, at
    // most four fetches of 50), the running jobs, two settle calls of outcomes.
    const CAP: u64 = (LIMIT + 4 * 50 + LIMIT + 2 * FLUSH) as u64;
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "slow-settles";
    faults::enqueue_range(&redis.url(), queue, "k", "job", 0, JOBS).await;
    proxy.set_latency(Duration::from_millis(20));
    let registry = Registry::new().fallback(handler_fn(|_| async { Ok(()) }));
    let mut config = ConsumerConfig::new(queue);
    config.concurrency = LIMIT;
    config.drain = true;
    config.metrics = false;
    config.fetcher.batch = 50;
    config.acker.flush_max = FLUSH;
    let consumer = Consumer::new(config, Redis::open(&proxy.url()).unwrap(), registry).unwrap();
    let in_memory = consumer.handle().in_memory;
    let run = tokio::spawn(consumer.run(CancellationToken::new()));
    let admin = faults::queue(&redis.url(), queue).await;
    let mut most_leased = 0;
    while !run.is_finished() {
        most_leased = most_leased.max(admin.stats().await.unwrap().in_flight);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.acked, JOBS as u64, "{report:?}");
    println!("slow settles: at most {most_leased} jobs leased at once (cap {CAP}); {report:?}");
    assert!(
        most_leased <= CAP,
        "leases held grew past the cap: {most_leased} > {CAP}"
    );
    let (held, outcomes) = (in_memory.held_peak(), in_memory.outcomes_peak());
    println!("in memory at most: {held} leases, {outcomes} outcomes waiting");
    assert!(held <= CAP as usize, "lease table past the cap: {held}");
    // The channel holds two calls' worth; one more is being gathered, with at most one
    // wave of outcomes from the pool (the jobs that finished in place: one per slot).
    assert!(outcomes <= 3 * FLUSH + LIMIT, "outcomes waiting: {outcomes}");
    assert_eq!(in_memory.held(), 0, "nothing held once drained");
}
