//! What every handler shares: the Redis connection, the auth settings, the CSRF token,
//! the refresh interval and the last read of the counters (for rates); and the one error
//! type handlers return.

use super::guard::Auth;
use axum::http::StatusCode;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir::Conn;
use weir::Queue;
use weir::admin::Queues;
use weir::admin::types::{QueueList, Rates};

/// Reads of the counters closer together than this keep the rates of the read before:
/// a rate over a few milliseconds says little.
const MIN_RATE_WINDOW: Duration = Duration::from_millis(500);

/// The shared state (cheap to clone).
#[derive(Clone)]
pub(crate) struct App(Arc<Inner>);

struct Inner {
    conn: Conn,
    auth: Option<Auth>,
    csrf: String,
    refresh: Duration,
    last: Mutex<Option<Sample>>,
}

/// One read of every queue's counters, with the rates it gave.
struct Sample {
    at: Instant,
    counters: BTreeMap<String, BTreeMap<String, u64>>,
    rates: BTreeMap<String, Rates>,
}

impl App {
    pub(crate) fn new(conn: Conn, auth: Option<Auth>, refresh: Duration) -> Self {
        let token: [u8; 32] = rand::random();
        let csrf = token.iter().map(|b| format!("{b:02x}")).collect();
        App(Arc::new(Inner {
            conn,
            auth,
            csrf,
            refresh,
            last: Mutex::new(None),
        }))
    }

    pub(crate) fn auth(&self) -> Option<&Auth> {
        self.0.auth.as_ref()
    }

    /// How the server is protected, for its start-up line.
    pub(crate) fn auth_note(&self) -> &'static str {
        match &self.0.auth {
            None => "no authentication: loopback only",
            Some(Auth::Basic { .. }) => "basic authentication",
            Some(Auth::Token(_)) => "token authentication",
        }
    }

    /// This process's CSRF token: every form carries it, every action checks it.
    pub(crate) fn csrf(&self) -> &str {
        &self.0.csrf
    }

    /// How often pages refresh themselves (zero: never).
    pub(crate) fn refresh(&self) -> Duration {
        self.0.refresh
    }

    pub(crate) fn queues(&self) -> Queues {
        Queues::new(self.0.conn.clone())
    }

    pub(crate) fn conn(&self) -> Conn {
        self.0.conn.clone()
    }

    /// An admin handle on `name` (a bad name is a 400).
    pub(crate) fn queue(&self, name: &str) -> Result<Queue, Failure> {
        Ok(Queue::new(self.0.conn.clone(), name)?)
    }

    /// Every queue, with rates from this process's previous read of the counters (no
    /// second read, so a page never waits for a rate window): the first read after start
    /// has none, later ones cover the time since the last read at least
    /// [`MIN_RATE_WINDOW`] before.
    pub(crate) async fn queue_list(&self) -> Result<QueueList, Failure> {
        let mut list = self.queues().list(None).await?;
        let now = Instant::now();
        let mut last = self.0.last.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = match last.as_ref() {
            Some(s) if now.duration_since(s.at) < MIN_RATE_WINDOW => {
                apply(&mut list, &s.rates);
                return Ok(list);
            }
            Some(s) => rates_since(s, &list, now),
            None => BTreeMap::new(),
        };
        apply(&mut list, &fresh);
        *last = Some(Sample {
            at: now,
            counters: list
                .queues
                .iter()
                .map(|q| (q.name.clone(), q.counters.clone()))
                .collect(),
            rates: fresh,
        });
        Ok(list)
    }
}

fn rates_since(s: &Sample, list: &QueueList, now: Instant) -> BTreeMap<String, Rates> {
    let window = now.duration_since(s.at);
    list.queues
        .iter()
        .filter_map(|q| {
            let before = s.counters.get(&q.name)?;
            Some((q.name.clone(), Rates::between(before, &q.counters, window)))
        })
        .collect()
}

fn apply(list: &mut QueueList, rates: &BTreeMap<String, Rates>) {
    for q in &mut list.queues {
        q.rates = rates.get(&q.name).copied();
    }
}

/// Why a request failed: a status and a message for people (pages show it in HTML, the
/// API as `{"error": ...}`).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl From<weir::Error> for Failure {
    /// A value the request gave that weir refuses is the request's fault (400); anything
    /// else (Redis unreachable, a script error) is the backend's (502).
    fn from(e: weir::Error) -> Self {
        use weir::Error;
        let status = match e {
            Error::InvalidName { .. } | Error::Config(_) | Error::Limiter(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        Failure::new(status, e.to_string())
    }
}
