//! Redis Sentinel: a primary with two replicas and a sentinel, all on free loopback ports;
//! producers and a consumer on `redis+sentinel://`, the primary killed mid-run. The
//! sentinel promotes the replica, the consumer follows it by itself, and every job whose
//! enqueue was confirmed with `wait_replicas(1)` runs. The same when the sentinel is told
//! to fail over while the primary lives (it is demoted to a replica).

mod faults;

use faults::Workers;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir::{EmbeddedRedis, NewJob, Producer, Redis};

const T: Duration = Duration::from_secs(120);

/// A sentinel process watching `mymaster`, killed on drop.
struct Sentinel {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sentinel {
    fn start(primary_port: u16) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile sentinel.log\n\
                 sentinel monitor mymaster 127.0.0.1 {primary_port} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 3000\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self { child, port, dir }
    }

    /// Waits until the sentinel sees `replicas` replicas of mymaster, linked up.
    fn wait_replicas(&self, replicas: usize) {
        let started = Instant::now();
        loop {
            let seen = self
                .ask::<Vec<Vec<String>>>("REPLICAS")
                .map(|rs| {
                    rs.iter()
                        .filter(|r| r.windows(2).any(|w| w[0] == "master-link-status" && w[1] == "ok"))
                        .count()
                })
                .unwrap_or(0);
            if seen >= replicas {
                return;
            }
            assert!(started.elapsed() < T, "the sentinel never saw the replicas");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `SENTINEL <what> mymaster`.
    fn ask<T: redis::FromRedisValue>(&self, what: &str) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))?;
        let mut c = client.get_connection_with_timeout(Duration::from_millis(500))?;
        redis::cmd("SENTINEL").arg(what).arg("mymaster").query(&mut c)
    }

    /// What the sentinel saw, for a failure message: its view of mymaster and its log.
    fn report(&self) -> String {
        let master = self
            .ask::<Vec<String>>("MASTER")
            .map(|kv| kv.join(" "))
            .unwrap_or_else(|e| e.to_string());
        let log = std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default();
        format!("sentinel's view of mymaster: {master}\nsentinel's log:\n{log}")
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A primary with `replicas` replicas and a sentinel watching it.
fn primary_with_replicas(replicas: usize) -> (EmbeddedRedis, Vec<EmbeddedRedis>, Sentinel) {
    let primary = EmbeddedRedis::start().unwrap();
    let replica_of = primary.port().to_string();
    let replicas: Vec<EmbeddedRedis> = (0..replicas)
        .map(|_| {
            EmbeddedRedis::start_with(&[
                "--save",
                "",
                "--appendonly",
                "no",
                "--replicaof",
                "127.0.0.1",
                &replica_of,
            ])
            .unwrap()
        })
        .collect();
    let sentinel = Sentinel::start(primary.port());
    sentinel.wait_replicas(replicas.len());
    (primary, replicas, sentinel)
}

/// A consumer on the sentinel's primary and a producer that confirms every enqueue with
/// `wait_replicas(1)`, enqueueing 20 jobs at a time; `fail_over` runs 3 s in, and
/// enqueueing goes on until 1,000 jobs were confirmed after it. Every confirmed job runs.
async fn confirmed_jobs_survive(sentinel: &Sentinel, q: &str, fail_over: impl FnOnce()) {
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", sentinel.port);
    let mut workers = Workers::running(&url, q, "print", 1);

    let redis = Redis::open(&url).unwrap();
    let producer = Producer::new(redis.connect().await.unwrap(), q)
        .unwrap()
        .wait_replicas(1, Duration::from_secs(2));
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut refused = 0;
    let mut last_refusal = String::new();
    let started = Instant::now();
    let mut fail_over = Some(fail_over);
    let mut n = 0;
    // Until a good stretch of jobs went in after the failover: it takes a second or
    // several (a down-after of 1 s, an election, a promotion), and longer when the
    // sentinel fails over twice (it does, now and then, on a busy machine).
    while fail_over.is_some() || after.len() < 1000 {
        assert!(
            started.elapsed() < T,
            "{} before, {} after, {refused} refused (the last: {last_refusal})\n{}",
            before.len(),
            after.len(),
            sentinel.report()
        );
        if started.elapsed() > Duration::from_secs(3)
            && let Some(f) = fail_over.take()
        {
            f();
        }
        let ids: Vec<String> = (n..n + 20).map(|i| format!("s-{i}")).collect();
        n += 20;
        let jobs = ids.iter().map(|id| NewJob::new("k", &1).unwrap().id(id.clone()));
        match producer.enqueue_bulk(jobs).await {
            Ok(r) if r.duplicates.is_empty() => (if fail_over.is_none() {
                &mut after
            } else {
                &mut before
            })
            .extend(ids),
            // Refused or unconfirmed during the failover: not promised.
            Ok(r) => {
                refused += 1;
                last_refusal = format!("duplicates: {:?}", r.duplicates);
            }
            Err(e) => {
                refused += 1;
                last_refusal = e.to_string();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!before.is_empty(), "no job confirmed before the failover");
    let confirmed: Vec<String> = before.iter().chain(&after).cloned().collect();
    workers.wait_printed(&confirmed, T).await;
    eprintln!(
        "{} jobs confirmed before the failover, {} after; {refused} calls refused",
        before.len(),
        after.len()
    );
    workers.stop(T);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_follow_a_sentinel_failover_and_no_confirmed_job_is_lost() {
    // Two replicas: once one is promoted, the other confirms the writes to it.
    let (mut primary, _replicas, sentinel) = primary_with_replicas(2);
    confirmed_jobs_survive(&sentinel, "sentinel", || primary.kill().unwrap()).await;
}

/// `SENTINEL FAILOVER`: the primary lives on and is demoted to a replica, so writes sent
/// to it are refused (READONLY) rather than dropped; producers and consumers move to the
/// promoted replica, and the demoted primary, now its replica, confirms their writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_primary_is_left_for_the_promoted_one() {
    let (_primary, _replicas, sentinel) = primary_with_replicas(1);
    confirmed_jobs_survive(&sentinel, "demoted", || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", sentinel.port))
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap();
        redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg("mymaster")
            .query::<()>(&mut c)
            .unwrap();
    })
    .await;
}
