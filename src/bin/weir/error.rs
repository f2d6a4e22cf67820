//! The command line's own error: what the library returned, or what the command line
//! found itself (a usage it cannot act on, a file it cannot read), with the exit code
//! each stands for.

use crate::exit;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An error from weir itself.
    #[error(transparent)]
    Weir(#[from] weir::Error),
    /// A command line the command cannot act on as given, with the way out in the
    /// message: a refusal a flag lifts (`--yes` for a deletion, `--create` for a queue
    /// never seen, `--no-metrics` for a metrics port in use), or a value to write
    /// otherwise (a Redis URL without its scheme). Nothing was touched.
    #[error("{0}")]
    Usage(String),
    /// A runtime failure the command line found itself (a file it cannot read, a handler
    /// it cannot reach, a question not confirmed).
    #[error("{0}")]
    Failed(String),
    /// Reading or writing the terminal or a file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The errors of the layers under weir's, through [`weir::Error`] as the library
/// converts them.
macro_rules! through_weir {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                CliError::Weir(e.into())
            }
        }
    )*};
}
through_weir!(
    serde_json::Error,
    redis::RedisError,
    weir::handler::http::HttpError,
    weir::limiter::LimiterError
);

/// Result with [`CliError`].
pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    /// The process's exit code: a value weir refuses (a range, a name, a handler URL)
    /// came from the command line, so it is a usage error; anything else is a runtime
    /// failure.
    pub(crate) fn exit_code(&self) -> u8 {
        use weir::Error;
        let e = match self {
            CliError::Usage(_) => return exit::USAGE,
            CliError::Failed(_) | CliError::Io(_) => return exit::FAILURE,
            CliError::Weir(e) => e,
        };
        match e {
            Error::InvalidName { .. } | Error::Config { .. } | Error::Limiter(_) => exit::USAGE,
            // A URL that does not parse, or an address where no Redis answers: the command
            // line names the wrong thing.
            Error::Connect { message, .. }
                if message.starts_with("invalid URL")
                    || message.starts_with(weir::redis::conn::NOT_REDIS) =>
            {
                exit::USAGE
            }
            Error::Http(
                weir::handler::http::HttpError::Url { .. } | weir::handler::http::HttpError::Header { .. },
            ) => exit::USAGE,
            Error::Http(weir::handler::http::HttpError::Env(_)) => exit::USAGE,
            _ => exit::FAILURE,
        }
    }
}

/// A runtime failure the command line found itself (a file it cannot read, a handler it
/// cannot reach): exit code 1, `msg` as the error line.
pub(crate) fn failure(msg: impl Into<String>) -> CliError {
    CliError::Failed(msg.into())
}

/// A command line the command cannot act on as given: exit code 2, `msg` (with the way
/// out) as the error line.
pub(crate) fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}
