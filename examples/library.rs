//! The README's library example: enqueue one job, then consume the queue until Ctrl-C.
//! Run with a Redis at REDIS_URL (default redis://127.0.0.1:6379):
//! `cargo run --example library`.

use weir::{Consumer, ConsumerConfig, JobError, NewJob, Producer, Redis, Registry, handler_fn};

#[tokio::main]
async fn main() -> weir::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let redis = Redis::open(&url)?;
    let producer = Producer::new(redis.connect().await?, "emails")?;
    let job = NewJob::new("welcome", &serde_json::json!({"to": "a@b.c"}))?.max_attempts(3);
    producer.enqueue(job).await?;

    let registry = Registry::new().on(
        "welcome",
        handler_fn(|job| async move {
            let to: serde_json::Value = job.payload().map_err(|e| JobError::fatal(e.to_string()))?;
            println!("sending to {to}");
            Ok(())
        }),
    );
    let config = ConsumerConfig::new("emails");
    let shutdown = weir::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let report = Consumer::new(config, redis, registry)?.run(shutdown).await?;
    println!("{report:?}");
    Ok(())
}
