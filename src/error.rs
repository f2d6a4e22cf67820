//! Errors of the queue layer: what a producer, an admin call or the runtime can hit.

/// An error from weir's queue operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A queue name, job id or job kind outside the accepted alphabet or length.
    #[error("invalid {what} {value:?}: use 1 to {max} characters from A-Z a-z 0-9 _ . : -")]
    InvalidName {
        /// Which kind of name.
        what: &'static str,
        /// The value given (cut to 200 characters).
        value: String,
        /// Longest length accepted.
        max: usize,
    },
    /// An envelope larger than the configured limit.
    #[error("job {id:?} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The job's id.
        id: String,
        /// Encoded size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A job id that already exists in the queue.
    #[error("job id {0:?} already exists in the queue")]
    Duplicate(String),
    /// The payload could not be encoded as JSON.
    #[error("cannot encode payload: {0}")]
    Encode(#[from] serde_json::Error),
    /// A configuration value out of its range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Redis could not be reached.
    #[error("cannot reach Redis at {url}: {message}")]
    Connect {
        /// The URL, with any password redacted.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A Redis command or script failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A script replied with something other than its documented shape.
    #[error("unexpected reply from script {script}: {detail}")]
    Reply {
        /// The script's name.
        script: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A limiter setting out of its range.
    #[error("invalid configuration: {0}")]
    Limiter(#[from] crate::limiter::LimiterError),
    /// The HTTP handler could not be set up.
    #[error("{0}")]
    Http(#[from] crate::handler::http::HttpError),
    /// An I/O error (embedded server, files).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A background task of a consumer panicked; the consumer stopped, after flushing the
    /// outcomes and releasing the leases its other tasks held.
    #[error("consumer task {task} failed: {detail}")]
    TaskFailed {
        /// The task: fetcher, pool, acker, reclaimer, ...
        task: &'static str,
        /// The panic's message.
        detail: String,
    },
}

impl Error {
    /// True for errors that a retry can cure (connection drops, timeouts, a busy server).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_unrecoverable_error()
                    || e.to_string().contains("LOADING")
                    || e.to_string().contains("BUSY")
            }
            Error::Connect { .. } | Error::Io(_) => true,
            _ => false,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
