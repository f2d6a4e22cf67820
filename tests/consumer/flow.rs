//! The happy path: everything in comes out acked; idle, paused, delayed and drain modes.

use crate::common::*;
use crate::support::*;
use std::time::Duration;
use weir::NewJob;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_jobs_in_n_acked_none_lost() {
    let ctx = Ctx::new("nin").await;
    const N: usize = 3_000;
    let report = ctx.producer().enqueue_bulk(jobs("k", "j", N)).await.unwrap();
    assert_eq!(report.enqueued, N as u64);
    let seen = Seen::default();
    let mut cfg = config(&ctx);
    cfg.concurrency = 32;
    cfg.fetcher.batch = 20;
    let c = start(&ctx, cfg, seen.acking("k"));
    let s = wait_stats(&ctx, "all jobs acked", |s| {
        s.counters.get("acked") == Some(&(N as u64))
    })
    .await;
    assert_eq!(s.pending(), 0);
    let tally = c.handle.tally.clone();
    wait_until("the consumer's tally", SOON, || async {
        tally.acked.load(std::sync::atomic::Ordering::Relaxed) == N as u64
    })
    .await;
    let report = c.stop().await;
    assert_eq!(
        (report.acked, report.retried, report.dead, report.lost_leases),
        (N as u64, 0, 0, 0)
    );
    assert_eq!(seen.ids(), N, "every job ran");
    assert_eq!(seen.calls(), N, "and ran once (no lease expired)");
    assert_empty(&ctx, 0).await;
}

#[tokio::test]
async fn idle_consumer_wakes_when_a_job_is_enqueued() {
    let ctx = Ctx::new("wake").await;
    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
    // up: subscribed to the wake messages, and its first fetch found the queue empty
    tokio::time::timeout(Duration::from_secs(10), c.handle.ready())
        .await
        .expect("the consumer is up");
    // and idle now
    tokio::time::sleep(Duration::from_millis(200)).await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("a"))
        .await
        .unwrap();
    // a wake takes milliseconds; the bound stays under the fetcher's 5 s idle recheck, so
    // passing means the wake message worked, not the periodic look
    wait_until("the job to run", Duration::from_secs(4), || async {
        seen.ids() == 1
    })
    .await;
    assert_eq!(c.stop().await.acked, 1);
    assert_empty(&ctx, 0).await;
}

/// Every command clients sent the server on `port` while it ran, by name: a
/// `redis-cli monitor` beside it (the commands scripts run inside Redis, which MONITOR
/// marks `lua`, are not sent by a client and are left out).
struct Monitor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Monitor {
    /// Starts watching; returns once the server has begun to report.
    fn start(port: u16) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-cli starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let first = lines.recv_timeout(SOON).expect("MONITOR answers");
        assert_eq!(first, "OK", "MONITOR's first line");
        Self { child, lines }
    }

    /// Stops watching; the commands clients sent meanwhile, by name.
    fn stop(mut self) -> std::collections::BTreeMap<String, u64> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut sent = std::collections::BTreeMap::new();
        for line in self.lines.try_iter() {
            // `<time> [<db> <client>] "<command>" ...`; a script's own calls: `[0 lua]`
            let Some((source, rest)) = line.split_once("] ") else {
                continue;
            };
            if source.ends_with(" lua") {
                continue;
            }
            let name = rest.split('"').nth(1).unwrap_or("?").to_lowercase();
            *sent.entry(name).or_default() += 1;
        }
        sent
    }
}

/// An idle consumer sends Redis at most one command a second, and still wakes at once:
/// every command it sent while it idled for four seconds (after its start-up), on a server
/// of its own (a script call is one command, whatever it runs inside Redis), then a job
/// enqueued after that runs within a second. Its housekeeping waits for work or change notices instead of
/// polling: the library check every 3 s, the reclaimer every 10 s, the settings, cron
/// and fetch safety polls every 30 s (about 0.6 commands a second in all), the heartbeat
/// (not in the window: every 10 s with the default lease, its first 10 s after start).
/// Any one of them polling each second (the settings watch did, by default) sends 4 more;
/// a fetcher that polled would send hundreds.
#[tokio::test]
async fn idle_consumer_does_not_poll_redis() {
    let ctx = Ctx::private("spin").await;
    let mut cfg = config(&ctx);
    // a limit well above the batch, so the fetch pipeline has room for several calls
    cfg.concurrency = 64;
    cfg.fetcher.batch = 10;
    // the defaults of what polls
    cfg.reclaimer.interval = weir::ReclaimerConfig::DEFAULT_INTERVAL;
    cfg.settings_poll = Some(weir::ConsumerConfig::DEFAULT_SETTINGS_POLL);
    cfg.lease = weir::ConsumerConfig::DEFAULT_LEASE;
    let seen = Seen::default();
    let c = start(&ctx, cfg, seen.acking("k"));
    tokio::time::timeout(SOON, c.handle.ready())
        .await
        .expect("the first fetch is answered");
    // Past the start-up's one-off calls (the reclaimer's first, which loads its script).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let monitor = Monitor::start(ctx.server.port());
    // A measuring window, not a wait for something: what is counted is what happened in it.
    const WINDOW_S: u64 = 4;
    tokio::time::sleep(Duration::from_secs(WINDOW_S)).await;
    let sent = monitor.stop();
    let total: u64 = sent.values().sum();
    println!("an idle consumer in {WINDOW_S} s: {total} commands: {sent:?}");
    assert!(
        total <= WINDOW_S,
        "{total} commands in {WINDOW_S} s of idling: {sent:?}"
    );
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("after"))
        .await
        .unwrap();
    // well under every safety poll: the wake message did it
    wait_until(
        "the job enqueued after the idle spell runs",
        Duration::from_secs(1),
        || async { seen.ids() == 1 },
    )
    .await;
    assert_eq!(c.stop().await.acked, 1);
}

#[tokio::test]
async fn drain_mode_exits_when_the_queue_is_empty() {
    let ctx = Ctx::new("drain").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 200)).await.unwrap();
    ctx.producer()
        .enqueue_in(
            Duration::from_millis(300),
            NewJob::new("k", &1).unwrap().id("late"),
        )
        .await
        .unwrap();
    let seen = Seen::default();
    let mut cfg = config(&ctx);
    cfg.drain = true;
    let report = start(&ctx, cfg.clone(), seen.acking("k")).join().await;
    assert_eq!(report.acked, 201, "waits for the delayed job too");
    assert_eq!(seen.ids(), 201);
    assert_empty(&ctx, 0).await;
    // and on an empty queue it exits at once
    assert_eq!(start(&ctx, cfg, seen.acking("k")).join().await.acked, 0);
}

#[tokio::test]
async fn paused_queue_is_not_consumed_until_resumed() {
    let ctx = Ctx::new("paused").await;
    assert!(ctx.admin().pause().await.unwrap());
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = ctx.stats().await;
    assert_eq!(
        (seen.ids(), s.ready_total(), s.in_flight, s.paused),
        (0, 10, 0, true)
    );
    assert!(ctx.admin().resume().await.unwrap());
    wait_until("jobs to run after resume", SOON, || async { seen.ids() == 10 }).await;
    assert_eq!(c.stop().await.acked, 10);
    assert_empty(&ctx, 0).await;
}

/// The heartbeat keeps a job that outlives its visibility timeout leased: it runs once.
#[tokio::test]
async fn heartbeat_keeps_long_jobs_leased() {
    let ctx = Ctx::new("heartbeat").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("slow"))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen.recording("k", |_| async {
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        Ok(())
    });
    let mut cfg = config(&ctx);
    cfg.lease = Duration::from_millis(600);
    let c = start(&ctx, cfg, registry);
    wait_stats(&ctx, "the slow job acked", |s| {
        s.counters.get("acked") == Some(&1)
    })
    .await;
    let report = c.stop().await;
    assert_eq!(seen.attempts("slow"), [0], "ran once, never reclaimed");
    assert_eq!((report.acked, report.lost_leases), (1, 0));
    assert_eq!(ctx.stats().await.counters.get("reclaimed"), None);
}

/// `Handle::ready`: not before the run, once its first fetch is answered; a consumer that
/// cannot reach Redis never is.
#[tokio::test]
async fn ready_once_the_first_fetch_is_answered() {
    let ctx = Ctx::new("ready").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("first"))
        .await
        .unwrap();
    let seen = Seen::default();
    let consumer = weir::Consumer::new(config(&ctx), ctx.redis.clone(), seen.acking("k")).unwrap();
    let handle = consumer.handle();
    assert!(!handle.is_ready(), "not up before it runs");
    let shutdown = weir::CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(10), handle.ready())
        .await
        .expect("up within 10 s");
    assert!(handle.is_ready());
    // The first fetch took the job waiting; the next comes by its wake message.
    ctx.producer()
        .enqueue(NewJob::new("k", &2).unwrap().id("second"))
        .await
        .unwrap();
    wait_until("both jobs to run", Duration::from_secs(4), || async {
        seen.ids() == 2
    })
    .await;
    shutdown.cancel();
    assert_eq!(task.await.unwrap().unwrap().acked, 2);

    let dead = weir::Redis::open(&format!("redis://127.0.0.1:{}", free_port())).unwrap();
    let consumer = weir::Consumer::new(config(&ctx), dead, Seen::default().acking("k")).unwrap();
    let handle = consumer.handle();
    let run = consumer.run(weir::CancellationToken::new());
    tokio::select! {
        r = run => assert!(r.is_err(), "no Redis: the run fails"),
        _ = handle.ready() => panic!("up without a Redis"),
    }
    assert!(!handle.is_ready());
}
