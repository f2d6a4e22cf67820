//! The crate's error types: [`Error`], what a producer, an admin call or the runtime can
//! hit, and the errors of the layers it wraps ([`LimiterError`], `HttpError`).
//!
//! This module sits at the bottom of the module graph: it names no other module of the
//! crate, so every layer can return these types and none of them loops back. The layer
//! errors are defined here for that reason and re-exported where they belong
//! (`weir::limiter::LimiterError`, `weir::handler::http::HttpError`).

use std::net::SocketAddr;
use std::path::PathBuf;

mod start;
pub use start::{LibraryError, ServerError};

/// An error from weir's queue operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A job not enqueued because a job with its id exists in the queue, or its unique key
    /// is held (see `NewJob::unique_for`).
    #[error("job {0:?} not enqueued: a job with its id exists in the queue, or its unique key is held")]
    Duplicate(String),
    /// The payload could not be encoded as JSON.
    #[error("cannot encode payload: {0}")]
    Encode(#[from] serde_json::Error),
    /// A bulk load ([`crate::Bulk`]) stopped: the first `enqueued` jobs of its
    /// input are stored; the job at input position `at` could not be written, or the
    /// call of the chunk that starts there failed after its retries. Nothing from the
    /// chunk that failed on is sent; chunks in flight beside a call that failed may have
    /// been stored too, so a retry from `enqueued` can store some jobs twice, and loses
    /// none.
    #[error("bulk load stopped at job {at}, the first {enqueued} jobs enqueued: {source}")]
    BulkStopped {
        /// Jobs from the start of the input that are stored.
        enqueued: u64,
        /// The input position of the job that failed, or of the first job of the chunk
        /// whose call failed.
        at: u64,
        /// Why.
        source: Box<Error>,
    },
    /// A configuration value out of its range, or settings that do not go together.
    #[error("invalid configuration: {setting} {problem}")]
    Config {
        /// The setting, with the value or the queue it belongs to where that helps
        /// (`queue q1 weight`, `runtime setting rate = "x"`).
        setting: String,
        /// What is wrong with it, as a phrase that follows the setting ("must be at
        /// least 1"), naming the accepted range or form.
        problem: String,
    },
    /// A TLS file given for a `rediss://` URL could not be read.
    #[error("cannot read the TLS {what} {}: {source}", path.display())]
    TlsFile {
        /// Which file: "CA file", "client certificate" or "client key".
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The Prometheus exporter could not serve on its address (taken, not allowed).
    #[error("cannot serve metrics on {addr}: {message}")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// What went wrong.
        message: String,
    },
    /// The private redis-server (`EmbeddedRedis`, `EmbeddedCluster`) did not start or did
    /// not answer.
    #[error(transparent)]
    RedisServer(#[from] ServerError),
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
    /// Redis refused a write for memory: it reached `maxmemory` and its policy
    /// (`noeviction`, as weir asks) frees nothing, so it refuses every write until memory
    /// is freed. Producers do not retry it (a retry cannot succeed until then).
    #[error(
        "redis is out of memory and refuses writes (maxmemory reached, policy noeviction): drain queues, raise maxmemory or free memory, then enqueue the rest ({0})"
    )]
    OutOfMemory(redis::RedisError),
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
    Limiter(#[from] LimiterError),
    /// The HTTP handler could not be set up.
    #[cfg(feature = "http")]
    #[error("{0}")]
    Http(#[from] HttpError),
    /// An I/O error (embedded server, files).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Redis may evict keys (its `maxmemory-policy` is not `noeviction`), which can lose
    /// jobs; the consumer refuses to start unless told to allow it.
    #[error(
        "redis maxmemory-policy is {policy}: it can evict queue keys and lose jobs; set `maxmemory-policy noeviction` (CONFIG SET or redis.conf), or pass --allow-eviction"
    )]
    Eviction {
        /// The policy in force.
        policy: String,
    },
    /// The weir Functions library in Redis cannot be used, or Redis has no Functions: the
    /// message says what is loaded and what to do.
    #[error(transparent)]
    Library(#[from] LibraryError),
    /// A background task of a consumer panicked; the consumer stopped, after flushing the
    /// outcomes and releasing the leases its other tasks held.
    #[error("consumer task {task} failed: {detail}")]
    TaskFailed {
        /// The task: fetcher, pool, acker, reclaimer, ...
        task: &'static str,
        /// The panic's message.
        detail: String,
    },
    /// Jobs were stored on their primary, but fewer replicas than asked confirmed them
    /// within the wait (`--wait-replicas`): they are there now, and may be lost if that
    /// primary fails before its replicas catch up. Not retried (a retry would store
    /// generated ids twice).
    #[error(
        "{jobs} jobs stored, but {acked} of {wanted} replicas confirmed them within {timeout_ms} ms: they may be lost if their primary fails now"
    )]
    NotReplicated {
        /// Jobs in the call.
        jobs: usize,
        /// Replicas that confirmed.
        acked: usize,
        /// Replicas asked for.
        wanted: usize,
        /// The wait, ms.
        timeout_ms: u64,
    },
}

impl Error {
    /// A [`Error::Config`]: `setting` (with its value where that helps) and what is wrong
    /// with it, as a phrase that follows it.
    pub(crate) fn config(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        Error::Config {
            setting: setting.into(),
            problem: problem.into(),
        }
    }

    /// This error, as [`Error::OutOfMemory`] when Redis refused the write for memory:
    /// told by the error code redis-rs gives (`OOM`), for a script's error and for a
    /// transaction Redis discarded because a command in it was refused (`EXECABORT`).
    pub(crate) fn classify_memory(self) -> Self {
        match self {
            Error::Redis(e) if is_oom(&e) => Error::OutOfMemory(e),
            e => e,
        }
    }

    /// True for errors that a retry can cure (connection drops, timeouts, a busy server).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_unrecoverable_error()
                    // A server still loading its data set, or running a long script.
                    || matches!(e.code(), Some("LOADING" | "BUSY"))
            }
            Error::Connect { .. } | Error::Io(_) => true,
            _ => false,
        }
    }
}

/// Whether Redis refused the call for memory (error code `OOM`, alone or inside an
/// aborted transaction).
fn is_oom(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    if e.code() == Some("OOM") {
        return true;
    }
    e.kind() == ErrorKind::Server(ServerErrorKind::ExecAbort)
        && e.clone()
            .into_server_errors()
            .is_some_and(|errs| errs.iter().any(|(_, s)| s.code() == "OOM"))
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from the limiter's configuration or its parsers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LimiterError {
    /// A setting outside its documented range.
    #[error("{name} must be {range} (got {value})")]
    OutOfRange {
        /// The setting's name, as the CLI and the settings hash spell it.
        name: &'static str,
        /// The accepted range, in words.
        range: &'static str,
        /// The value given.
        value: String,
    },
    /// Two settings that contradict each other.
    #[error("{0}")]
    Conflict(String),
    /// A value that does not parse.
    #[error("invalid {what} {value:?}: {hint}")]
    Parse {
        /// What was being parsed.
        what: &'static str,
        /// The text given.
        value: String,
        /// How to write it.
        hint: &'static str,
    },
}

/// Errors building the HTTP handler.
#[cfg(feature = "http")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL does not parse, or is not `http://` or `https://`.
    #[error("invalid handler URL {url:?}: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// A configured header that cannot be sent (the message never shows its value).
    #[error("invalid header {name:?}: {reason}")]
    Header {
        /// The header's name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment variable named for a header or a secret is unset or empty.
    #[error("{0}")]
    Env(String),
    /// The CA file for `https://` could not be read or holds no certificate.
    #[error("cannot read the CA file {}: {reason}", path.display())]
    Ca {
        /// Its path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// TLS could not be set up (no system roots, say).
    #[error("TLS: {0}")]
    Tls(String),
    /// The handler's host did not take a connection or a TLS handshake at start.
    #[error("cannot reach the handler at {url}: {reason}")]
    Unreachable {
        /// The handler's URL.
        url: String,
        /// What failed.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a server answers with `reply` (RESP, one line).
    fn server_error(reply: &str) -> Error {
        let v = redis::parse_redis_value(format!("{reply}\r\n").as_bytes()).expect("a RESP error line");
        Error::Redis(v.extract_error().expect_err("an error reply"))
    }

    #[test]
    fn transient_by_error_code_not_by_message() {
        assert!(server_error("-LOADING Redis is loading the dataset in memory").is_transient());
        assert!(server_error("-BUSY Redis is busy running a script").is_transient());
        // The words in a message of another code are not the code.
        assert!(!server_error("-ERR Error running script: BUSY LOADING").is_transient());
        assert!(!server_error("-NOPERM this user has no permissions").is_transient());
    }
}
