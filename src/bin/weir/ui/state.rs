//! What every handler shares: the Redis connection, the auth settings, the CSRF token,
//! the refresh interval; and the one error type handlers return.

use super::guard::Auth;
use axum::http::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use weir::Conn;
use weir::Queue;
use weir::queue::admin::Queues;
use weir::queue::json::QueueList;

/// The shared state (cheap to clone).
#[derive(Clone)]
pub(crate) struct App(Arc<Inner>);

struct Inner {
    conn: Conn,
    auth: Option<Auth>,
    csrf: String,
    refresh: Duration,
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

    /// Every queue, with the rates of its history (the same for every reader: see
    /// `weir::queue::samples`).
    pub(crate) async fn queue_list(&self) -> Result<QueueList, Failure> {
        Ok(self.queues().list(None).await?)
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
            Error::InvalidName { .. } | Error::Config { .. } | Error::Limiter(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        Failure::new(status, e.to_string())
    }
}
