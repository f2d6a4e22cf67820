//! Shared test support: a private redis-server per test binary, a queue name per test,
//! a snapshot of every key of a queue for "state before → call → state after" checks,
//! handlers that record what they saw ([`Seen`]), and the one way to wait for something
//! ([`wait_until`]) or pick a port ([`free_port`]).
//!
//! The server lives while any test holds a [`Ctx`]; when the last one drops it, the server
//! is killed (a later test starts a new one). Nothing here ever runs FLUSHALL: tests share
//! a server and keep apart by queue name.
#![allow(dead_code)]

pub(crate) mod clients;
mod metrics;
#[allow(unused_imports)] // not every test binary reads a consumer's metrics
pub(crate) use metrics::{sample, scrape};
mod seen;
#[allow(unused_imports)] // not every test binary runs a consumer
pub(crate) use seen::Seen;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use weir::Conn;
use weir::EmbeddedRedis;
use weir::queue::keys::QueueKeys;

/// Sends `sig` to the process `pid` (std has only SIGKILL; rustix sends any signal
/// without unsafe code and without spawning `kill`).
pub(crate) fn signal(pid: u32, sig: rustix::process::Signal) -> std::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid as i32).ok_or(std::io::ErrorKind::InvalidInput)?;
    Ok(rustix::process::kill_process(pid, sig)?)
}

static SERVER: Mutex<Weak<EmbeddedRedis>> = Mutex::new(Weak::new());
static NEXT_QUEUE: AtomicU64 = AtomicU64::new(0);

/// The shared server, started on first use.
pub(crate) fn server() -> Arc<EmbeddedRedis> {
    let mut slot = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slot.upgrade() {
        return s;
    }
    let s = Arc::new(EmbeddedRedis::start().expect("redis-server starts"));
    *slot = Arc::downgrade(&s);
    s
}

/// A queue name no other test uses: `label` (for reading logs) plus a counter.
pub(crate) fn queue_name(label: &str) -> String {
    let n = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
    format!("t-{label}-{}-{n}", std::process::id())
}

/// One test's world: the server, its URL, a connection and a queue of its own.
pub(crate) struct Ctx {
    pub server: Arc<EmbeddedRedis>,
    pub url: String,
    pub redis: weir::Redis,
    pub conn: Conn,
    pub queue: String,
    pub keys: QueueKeys,
}

impl Ctx {
    pub(crate) async fn new(label: &str) -> Self {
        Self::on(server(), label).await
    }

    /// A world with a redis-server of its own, for tests that disturb the server
    /// (kill its clients) or count its commands.
    pub(crate) async fn private(label: &str) -> Self {
        let own = Arc::new(EmbeddedRedis::start().expect("redis-server starts"));
        Self::on(own, label).await
    }

    async fn on(server: Arc<EmbeddedRedis>, label: &str) -> Self {
        let url = server.url();
        let redis = weir::Redis::open(&url).expect("url parses");
        let conn = redis.connect().await.expect("connects");
        let queue = queue_name(label);
        let keys = QueueKeys::new(&queue).expect("valid queue name");
        Self {
            server,
            url,
            redis,
            conn,
            queue,
            keys,
        }
    }

    /// A fresh queue on the same server and connection.
    pub(crate) fn other_queue(&self, label: &str) -> (String, QueueKeys) {
        let q = queue_name(label);
        let k = QueueKeys::new(&q).unwrap();
        (q, k)
    }

    pub(crate) fn c(&self) -> Conn {
        self.conn.clone()
    }

    pub(crate) fn producer(&self) -> weir::Producer {
        weir::Producer::new(self.c(), &self.queue).unwrap()
    }

    pub(crate) fn admin(&self) -> weir::Queue {
        weir::Queue::new(self.c(), &self.queue).unwrap()
    }

    pub(crate) async fn snapshot(&self) -> State {
        snapshot(&mut self.c(), &self.keys).await
    }

    pub(crate) async fn stats(&self) -> weir::Stats {
        self.admin().stats().await.unwrap()
    }

    pub(crate) async fn now_ms(&self) -> u64 {
        redis_now_ms(&mut self.c()).await
    }

    /// Runs a raw command (seeding states the library would never write).
    pub(crate) async fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query_async(&mut self.c()).await.unwrap()
    }
}

/// Redis `TIME`, in ms: the clock every script uses.
pub(crate) async fn redis_now_ms(conn: &mut Conn) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1000 + us / 1000
}

/// Polls `check` every 20 ms until it holds, up to `limit`; panics with `what` otherwise.
pub(crate) async fn wait_until<F, Fut>(what: &str, limit: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let held = try_wait_until(limit, check).await;
    assert!(held, "timed out after {limit:?} waiting for: {what}");
}

/// [`wait_until`] for callers that report a timeout themselves (with what they found) or
/// can go on without: true if `check` held within `limit`.
pub(crate) async fn try_wait_until<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port the OS just handed out and that nothing listens on now. Another
/// process could take it before the caller does; tests accept that small chance.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds a loopback port");
    listener.local_addr().expect("has an address").port()
}

/// An envelope exactly as `envelope.rs` writes it (fixed `enqueued_at`, payload `{"n":1}`).
pub(crate) fn env(id: &str, attempt: u32, max: u32, priority: u8) -> String {
    format!(
        r#"{{"attempt":{attempt},"max_attempts":{max},"priority":{priority},"enqueued_at":{ENQUEUED_AT},"id":"{id}","kind":"k","payload":{{"n":1}}}}"#
    )
}

/// The `enqueued_at` of [`env`].
pub(crate) const ENQUEUED_AT: u64 = 1_700_000_000_000;
/// A lease deadline far in the future (a lease that holds): 2096.
pub(crate) const FUTURE: u64 = 4_000_000_000_000;
/// A lease deadline long past (a lease that expired).
pub(crate) const PAST: u64 = 1_000;
/// Scores at or above `NOW` in an expected [`State`] mean "Redis time during the call,
/// plus `score - NOW` ms"; [`assert_state`] checks them against the clock window.
pub(crate) const NOW: u64 = 1 << 60;

/// Everything one queue holds, key by key, in a comparable form. Scored sets are sorted
/// by (score, member).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct State {
    pub ready: [Vec<String>; 3],
    pub delayed: [Vec<(String, u64)>; 3],
    pub jobs: BTreeMap<String, String>,
    pub lease: Vec<(String, u64)>,
    pub dead: Vec<(String, u64)>,
    pub errors: BTreeMap<String, String>,
    pub paused: bool,
    pub counters: BTreeMap<String, u64>,
    /// Deferral records: id -> (count, first deferral ms); a first `>= NOW` in an
    /// expected state is Redis-time relative, like scores.
    pub deferrals: BTreeMap<String, (u64, u64)>,
    /// Queue settings (dead_cap, runtime limits).
    pub settings: BTreeMap<String, String>,
    /// Start marks: id -> consumer tag (`tag:s` for a suspect).
    pub started: BTreeMap<String, String>,
    /// The suspects list, in order.
    pub suspects: Vec<String>,
    /// Tokens of extended leases: id -> fetch token.
    pub lease_tokens: BTreeMap<String, String>,
    /// Unique-window keys: unique key -> id of the job holding it. Each must expire
    /// ([`snapshot`] checks it has a TTL): windows are bounded by time.
    pub unique: BTreeMap<String, String>,
    /// Keys under the queue's prefix that `QueueKeys::all` does not name and that are
    /// not unique-window keys (should be none).
    pub stray: Vec<String>,
    /// Run histories: id -> the JSON array of its last runs (`QueueKeys::history`).
    pub history: BTreeMap<String, String>,
    /// Completed jobs kept: (id, completed-at ms) (`QueueKeys::done`).
    pub done: Vec<(String, u64)>,
    /// Results of completed jobs kept: id -> result text (`QueueKeys::results`).
    pub results: BTreeMap<String, String>,
}

fn pairs(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    let mut out: Vec<_> = v.iter().map(|(a, b)| (a.to_string(), *b)).collect();
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    out
}

/// The id an inline job's envelope holds (`lib.lua`'s items: an envelope opens with `{`).
pub(crate) fn item_id(item: &str) -> Option<String> {
    if !item.starts_with('{') {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(item).ok()?;
    Some(v["id"].as_str()?.to_string())
}

impl State {
    /// This state with every inline job (an envelope in a ready list, the suspects or the
    /// lease) named by its id, its envelope in `jobs`: where the jobs are, whichever way
    /// they are stored.
    pub(crate) fn by_id(mut self) -> Self {
        let mut adopt = |item: &mut String| {
            if let Some(id) = item_id(item) {
                self.jobs.insert(id.clone(), std::mem::replace(item, id));
            }
        };
        for list in &mut self.ready {
            list.iter_mut().for_each(&mut adopt);
        }
        self.suspects.iter_mut().for_each(&mut adopt);
        self.lease.iter_mut().for_each(|(item, _)| adopt(item));
        let rekey = |m: &mut BTreeMap<String, String>| {
            *m = std::mem::take(m)
                .into_iter()
                .map(|(k, v)| (item_id(&k).unwrap_or(k), v))
                .collect();
        };
        rekey(&mut self.started);
        rekey(&mut self.lease_tokens);
        self
    }
}

/// Builders for seeding and expecting states.
impl State {
    pub(crate) fn ready(mut self, p: usize, ids: &[&str]) -> Self {
        self.ready[p] = ids.iter().map(|s| s.to_string()).collect();
        self
    }
    pub(crate) fn delayed(mut self, p: usize, v: &[(&str, u64)]) -> Self {
        self.delayed[p] = pairs(v);
        self
    }
    /// A job with envelope [`env`]`(id, attempt, max, priority)`.
    pub(crate) fn job(mut self, id: &str, attempt: u32, max: u32, priority: u8) -> Self {
        self.jobs.insert(id.into(), env(id, attempt, max, priority));
        self
    }
    pub(crate) fn raw_job(mut self, id: &str, envelope: &str) -> Self {
        self.jobs.insert(id.into(), envelope.into());
        self
    }
    pub(crate) fn no_job(mut self, id: &str) -> Self {
        self.jobs.remove(id);
        self
    }
    pub(crate) fn lease(mut self, v: &[(&str, u64)]) -> Self {
        self.lease = pairs(v);
        self
    }
    pub(crate) fn dead(mut self, v: &[(&str, u64)]) -> Self {
        self.dead = pairs(v);
        self
    }
    pub(crate) fn error(mut self, id: &str, e: &str) -> Self {
        self.errors.insert(id.into(), e.into());
        self
    }
    pub(crate) fn paused(mut self, p: bool) -> Self {
        self.paused = p;
        self
    }
    pub(crate) fn counter(mut self, name: &str, n: u64) -> Self {
        self.counters.insert(name.into(), n);
        self
    }
    /// A deferral record: `count` deferrals, the first at `first_ms`.
    pub(crate) fn deferral(mut self, id: &str, count: u64, first_ms: u64) -> Self {
        self.deferrals.insert(id.into(), (count, first_ms));
        self
    }
    pub(crate) fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.insert(name.into(), value.into());
        self
    }
    pub(crate) fn started(mut self, id: &str, tag: &str) -> Self {
        self.started.insert(id.into(), tag.into());
        self
    }
    pub(crate) fn suspects(mut self, ids: &[&str]) -> Self {
        self.suspects = ids.iter().map(|s| s.to_string()).collect();
        self
    }
    pub(crate) fn lease_token(mut self, id: &str, token: u64) -> Self {
        self.lease_tokens.insert(id.into(), token.to_string());
        self
    }
    /// Job `id` holds unique key `key` (seeded with an hour's window).
    pub(crate) fn unique(mut self, key: &str, id: &str) -> Self {
        self.unique.insert(key.into(), id.into());
        self
    }
}

/// Writes `s` into the (empty) queue `keys`, key by key.
pub(crate) async fn seed(conn: &mut Conn, keys: &QueueKeys, s: &State) {
    if s == &State::default() {
        return;
    }
    let k = keys.all();
    let mut p = redis::pipe();
    for i in 0..3 {
        if !s.ready[i].is_empty() {
            p.rpush(&k[i], &s.ready[i]).ignore();
        }
        for (id, score) in &s.delayed[i] {
            p.zadd(&k[3 + i], id, *score).ignore();
        }
    }
    for (id, e) in &s.jobs {
        p.hset(&k[6], id, e).ignore();
    }
    for (id, score) in &s.lease {
        p.zadd(&k[7], id, *score).ignore();
    }
    for (id, score) in &s.dead {
        p.zadd(&k[8], id, *score).ignore();
    }
    for (id, e) in &s.errors {
        p.hset(&k[9], id, e).ignore();
    }
    if s.paused {
        p.set(&k[10], "1").ignore();
    }
    for (name, n) in &s.counters {
        p.hset(&k[11], name, *n).ignore();
    }
    for (id, (n, first)) in &s.deferrals {
        p.hset(keys.deferrals(), id, format!("{n} {first}")).ignore();
    }
    for (name, v) in &s.settings {
        p.hset(keys.settings(), name, v).ignore();
    }
    for (id, tag) in &s.started {
        p.hset(keys.started(), id, tag).ignore();
    }
    if !s.suspects.is_empty() {
        p.rpush(keys.suspects(), &s.suspects).ignore();
    }
    for (id, token) in &s.lease_tokens {
        p.hset(keys.lease_tokens(), id, token).ignore();
    }
    for (key, id) in &s.unique {
        let k = format!("{}{key}", keys.unique_prefix());
        p.cmd("SET").arg(k).arg(id).arg("PX").arg(3_600_000).ignore();
    }
    let _: () = p.query_async(conn).await.unwrap();
}

async fn key_type(conn: &mut Conn, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
}

async fn zset(conn: &mut Conn, key: &str) -> Vec<(String, u64)> {
    let raw: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(conn)
        .await
        .unwrap();
    let mut v: Vec<_> = raw.into_iter().map(|(m, s)| (m, s as u64)).collect();
    v.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    v
}

/// Reads every key of the queue, checking each has the type `keys.rs` documents.
pub(crate) async fn snapshot(conn: &mut Conn, keys: &QueueKeys) -> State {
    let k = keys.all();
    let types = [
        "list", "list", "list", "zset", "zset", "zset", "hash", "zset", "zset", "hash", "string", "hash",
        "none", "hash", "list", "hash", "hash", "hash", "none",
    ];
    for (key, want) in k.iter().zip(types) {
        let t = key_type(conn, key).await;
        assert!(t == "none" || t == want, "{key} is a {t}, documented as {want}");
    }
    let mut s = State::default();
    for i in 0..3 {
        s.ready[i] = redis::cmd("LRANGE")
            .arg(&k[i])
            .arg(0)
            .arg(-1)
            .query_async(conn)
            .await
            .unwrap();
        s.delayed[i] = zset(conn, &k[3 + i]).await;
    }
    s.jobs = redis::cmd("HGETALL").arg(&k[6]).query_async(conn).await.unwrap();
    s.lease = zset(conn, &k[7]).await;
    s.dead = zset(conn, &k[8]).await;
    s.errors = redis::cmd("HGETALL").arg(&k[9]).query_async(conn).await.unwrap();
    let paused: u64 = redis::cmd("EXISTS").arg(&k[10]).query_async(conn).await.unwrap();
    s.paused = paused == 1;
    s.counters = redis::cmd("HGETALL").arg(&k[11]).query_async(conn).await.unwrap();
    for key in [keys.deferrals().to_owned(), keys.settings()] {
        let t = key_type(conn, &key).await;
        assert!(t == "none" || t == "hash", "{key} is a {t}, documented as a hash");
    }
    let deferrals: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.deferrals())
        .query_async(conn)
        .await
        .unwrap();
    for (id, rec) in deferrals {
        // (per-cause parts follow the totals: lib.lua's deferral_record)
        let mut parts = rec.split(' ');
        let (n, first) = parts
            .next()
            .zip(parts.next())
            .expect("a deferral record opens with 'count first_ms'");
        s.deferrals
            .insert(id, (n.parse().unwrap(), first.parse().unwrap()));
    }
    s.settings = redis::cmd("HGETALL")
        .arg(keys.settings())
        .query_async(conn)
        .await
        .unwrap();
    s.started = redis::cmd("HGETALL")
        .arg(keys.started())
        .query_async(conn)
        .await
        .unwrap();
    s.suspects = redis::cmd("LRANGE")
        .arg(keys.suspects())
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap();
    s.lease_tokens = redis::cmd("HGETALL")
        .arg(keys.lease_tokens())
        .query_async(conn)
        .await
        .unwrap();
    assert!(
        ["none", "hash"].contains(&key_type(conn, &keys.history()).await.as_str()),
        "the history is a hash"
    );
    s.history = redis::cmd("HGETALL")
        .arg(keys.history())
        .query_async(conn)
        .await
        .unwrap();
    s.done = zset(conn, &keys.done()).await;
    s.results = redis::cmd("HGETALL")
        .arg(keys.results())
        .query_async(conn)
        .await
        .unwrap();
    let pattern = format!("weir:{{{}}}:*", keys.name());
    let found: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(conn).await.unwrap();
    // The worker registry (keys.rs's `workers` and `worker`) and the records of the
    // consumers' settle calls (`settle_record`, expiring) are the consumers', not the
    // queue's state.
    let worker_prefix = keys.worker("");
    let record_prefix = keys.settle_record("");
    let found = found
        .into_iter()
        .filter(|f| !k.contains(f) && *f != keys.workers() && !f.starts_with(&worker_prefix))
        .filter(|f| !f.starts_with(&record_prefix))
        .filter(|f| *f != keys.history() && *f != keys.done() && *f != keys.results());
    for f in found {
        let Some(key) = f.strip_prefix(keys.unique_prefix()) else {
            s.stray.push(f);
            continue;
        };
        let (id, ttl): (String, i64) = redis::pipe()
            .get(&f)
            .cmd("PTTL")
            .arg(&f)
            .query_async(conn)
            .await
            .unwrap();
        assert!(ttl > 0, "unique key {f} has no expiry (PTTL {ttl})");
        s.unique.insert(key.to_owned(), id);
    }
    s.stray.sort();
    s
}

/// Checks a score the script took from Redis `TIME`: `NOW + d` must lie in the window.
pub(crate) fn check_time(what: &str, expected: u64, actual: u64, window: (u64, u64)) {
    let d = expected - NOW;
    assert!(
        actual >= window.0 + d && actual <= window.1 + d,
        "{what}: {actual} is not Redis time + {d} ms (window {window:?})"
    );
}

fn resolve(what: &str, expected: &mut [(String, u64)], actual: &[(String, u64)], window: (u64, u64)) {
    for (id, score) in expected.iter_mut() {
        if *score >= NOW {
            let got = actual.iter().find(|(a, _)| a == id).map(|(_, s)| *s);
            let Some(got) = got else { continue };
            check_time(&format!("{what} score of {id}"), *score, got, window);
            *score = got;
        }
    }
    expected.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
}

/// Asserts `actual == expected`, where expected scores `>= NOW` are Redis-time relative
/// (see [`NOW`]) and `window` is Redis time read just before and just after the call.
pub(crate) fn assert_state(case: &str, actual: &State, expected: &State, window: (u64, u64)) {
    let mut e = expected.clone();
    for i in 0..3 {
        resolve("delayed", &mut e.delayed[i], &actual.delayed[i], window);
    }
    resolve("lease", &mut e.lease, &actual.lease, window);
    resolve("dead", &mut e.dead, &actual.dead, window);
    for (id, (_, first)) in e.deferrals.iter_mut() {
        if let (true, Some((_, got))) = (*first >= NOW, actual.deferrals.get(id)) {
            check_time(&format!("first deferral of {id}"), *first, *got, window);
            *first = *got;
        }
    }
    assert_eq!(actual, &e, "case {case:?}: state after the call");
}

/// Seeds `before` into a fresh queue, runs `call`, and checks the state after against
/// `after`; returns the call's reply for the case to check.
pub(crate) async fn run_case<T, F, Fut>(ctx: &Ctx, case: &str, before: &State, call: F, after: &State) -> T
where
    F: FnOnce(Conn, QueueKeys) -> Fut,
    Fut: std::future::Future<Output = weir::Result<T>>,
{
    let (_, keys) = ctx.other_queue("case");
    let mut conn = ctx.c();
    seed(&mut conn, &keys, before).await;
    assert_eq!(
        &snapshot(&mut conn, &keys).await,
        before,
        "case {case:?}: seeding"
    );
    let t0 = redis_now_ms(&mut conn).await;
    let reply = call(ctx.c(), keys.clone())
        .await
        .unwrap_or_else(|e| panic!("case {case:?}: {e}"));
    let t1 = redis_now_ms(&mut conn).await;
    let got = snapshot(&mut conn, &keys).await;
    assert_state(case, &got, after, (t0, t1));
    reply
}
