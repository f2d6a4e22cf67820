//! Runtime settings on a consumer with a fixed limit (no `--adaptive`), against a real
//! redis-server: `weir limits set --max-concurrency N` retunes the fixed limit live, and
//! clearing it gives the consumer its own `--concurrency` back.

mod common;

use common::wait_until;
use std::time::Duration;
use weir::settings::Settings;
use weir::{CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Redis, Registry};

/// How long a running consumer may take to apply a stored setting (it polls every 50 ms).
const APPLIED: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_limit_takes_the_runtime_max_concurrency() {
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    let mut conn = redis.connect().await.unwrap();
    let mut config = ConsumerConfig::new("fixed");
    config.concurrency = 10;
    config.settings_poll = Some(Duration::from_millis(50));
    let noop = weir::handler_fn(|_| async { Ok(()) });
    let consumer = Consumer::new(config, redis, Registry::new().fallback(noop)).unwrap();
    let h = consumer.handle();
    assert!(h.limiter.is_none(), "a fixed limit");
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(consumer.run(shutdown.clone()));
    assert_eq!(h.limit.get(), 10);

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
