//! Runtime settings on a consumer with a fixed limit (no `--adaptive`), against a real
//! redis-server: `weir limits set --max-concurrency N` retunes the fixed limit live, and
//! clearing it gives the consumer its own `--concurrency` back.

mod common;

use common::wait_until;
use std::time::Duration;
use weir::queue::settings::Settings;
use weir::{CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Redis, Registry};

/// How long a running consumer may take to apply a stored setting: the writer's change
/// notice tells it at once (its safety poll, the default, is 30 s).
const APPLIED: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_limit_takes_the_runtime_max_concurrency() {
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    let mut conn = redis.connect().await.unwrap();
    let mut config = ConsumerConfig::new("fixed");
    config.concurrency = 10;
    assert_eq!(config.settings_poll, Some(Duration::from_secs(30)), "the default");
    let noop = weir::handler_fn(|_| async { Ok(()) });
    let consumer = Consumer::new(config, redis, Registry::new().fallback(noop)).unwrap();
    let h = consumer.handle();
    assert!(h.limiter.is_none(), "a fixed limit");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(consumer.run(shutdown.clone()));
    assert_eq!(h.limit.get(), 10);
    // Up, and listening for change notices (a change before that is read when it starts
    // listening): from here on only the notice can apply a change within APPLIED.
    wait_until("the consumer listens for notices", APPLIED, || {
        let mut conn = conn.clone();
        async move {
            let (_, n): (String, u64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("weir:{fixed}:notices")
                .query_async::<Vec<(String, u64)>>(&mut conn)
                .await
                .unwrap()
                .remove(0);
            n == 1
        }
    })
    .await;

    let set = Settings {
        max: Some(3),
        ..Settings::default()
    };
    set.store(&mut conn, "fixed").await.unwrap();
    wait_until("max 3 applied", APPLIED, || async { h.limit.get() == 3 }).await;

    Settings::clear(&mut conn, "fixed").await.unwrap();
    wait_until("its own 10 back", APPLIED, || async { h.limit.get() == 10 }).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
