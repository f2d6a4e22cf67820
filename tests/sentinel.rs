//! Redis Sentinel: a primary with two replicas and a sentinel, all on free loopback ports;
//! producers and a consumer on `redis+sentinel://`, the primary killed mid-run. The
//! sentinel promotes the replica, the consumer follows it by itself, and every job whose
//! enqueue was confirmed with `wait_replicas(1)` runs.

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
    _dir: tempfile::TempDir,
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
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    /// Waits until the sentinel sees `replicas` replicas of mymaster, linked up.
    fn wait_replicas(&self, replicas: usize) {
        let started = Instant::now();
        loop {
            let seen = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
                .and_then(|mut c| {
                    redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg("mymaster")
                        .query::<Vec<Vec<String>>>(&mut c)
                })
                .map(|rs| {
                    rs.iter()
                        .filter(|r| r.windows(2).any(|w| w[0] == "master-link-status" && w[1] == "ok"))
                        .count()
                })
                .unwrap_or(0);
            if seen >= replicas {
                return;
            }
            assert!(started.elapsed() < T, "the sentinel never saw the replica");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Sentinel {
    /// What the sentinel saw, for a failure message: its view of mymaster and its log.
    fn report(&self) -> String {
        let master = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut c| {
                redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg("mymaster")
                    .query::<Vec<String>>(&mut c)
            })
            .map(|kv| kv.join(" "))
            .unwrap_or_else(|e| e.to_string());
        let log = std::fs::read_to_string(self._dir.path().join("sentinel.log")).unwrap_or_default();
        format!("sentinel's view of mymaster: {master}\nsentinel's log:\n{log}")
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_follow_a_sentinel_failover_and_no_confirmed_job_is_lost() {
    let mut primary = EmbeddedRedis::start().unwrap();
    let replica_of = primary.port().to_string();
    // Two replicas: once one is promoted, the other confirms the writes to it.
    let replica = || {
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
    };
    let _replicas = [replica(), replica()];
    let sentinel = Sentinel::start(primary.port());
    sentinel.wait_replicas(2);
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", sentinel.port);
    let q = "sentinel";

    let mut workers = Workers::running(&url, q, "print", 1);

    let redis = Redis::open(&url).unwrap();
    let producer = Producer::new(redis.connect().await.unwrap(), q)
        .unwrap()
        .wait_replicas(1, Duration::from_secs(2));
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut refused = 0;
    let mut last_refusal = String::new();
    let started = Instant::now();
    let mut killed = false;
    let mut n = 0;
    // Until a good stretch of jobs went in after the kill: the sentinel's failover takes
    // a second or several (its down-after is 1 s, then an election and a promotion).
    while !killed || after.len() < 1000 {
        assert!(
            started.elapsed() < T,
            "{} before, {} after, {refused} refused (the last: {last_refusal})\n{}",
            before.len(),
            after.len(),
            sentinel.report()
        );
        if !killed && started.elapsed() > Duration::from_secs(3) {
            primary.kill().unwrap();
            killed = true;
        }
        let ids: Vec<String> = (n..n + 20).map(|i| format!("s-{i}")).collect();
        n += 20;
        let jobs = ids.iter().map(|id| NewJob::new("k", &1).unwrap().id(id.clone()));
        match producer.enqueue_bulk(jobs).await {
            Ok(r) if r.duplicates.is_empty() => (if killed { &mut after } else { &mut before }).extend(ids),
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
    assert!(
        !before.is_empty() && !after.is_empty(),
        "{} before, {} after, {refused} refused",
        before.len(),
        after.len()
    );
    let confirmed: Vec<String> = before.iter().chain(&after).cloned().collect();
    workers.wait_printed(&confirmed, T).await;
    eprintln!(
        "{} jobs confirmed before the kill, {} after; {refused} calls refused",
        before.len(),
        after.len()
    );
    workers.stop(T);
}
