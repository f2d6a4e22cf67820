//! The errors of what weir needs before it can work: a private redis-server that starts
//! ([`ServerError`]) and a Functions library in Redis it can use ([`LibraryError`]).
//! Wrapped by [`super::Error::RedisServer`] and [`super::Error::Library`].

/// Why a private redis-server (or the cluster of them) did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A program could not be run (not installed, not executable).
    #[error(
        "cannot run {program} ({source}); install it (Debian: apt-get install {package}) or pass --redis-url"
    )]
    Missing {
        /// The program: `redis-server` or `redis-cli`.
        program: &'static str,
        /// The Debian package that has it.
        package: &'static str,
        /// Why it could not be run.
        source: std::io::Error,
    },
    /// The server exited while starting.
    #[error("redis-server exited at start ({status})")]
    Exited {
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// What was started did not answer, or was not ready, within the wait.
    #[error("{what} within {}s", within.as_secs())]
    NotReady {
        /// What was waited for: "redis-server did not answer", "the cluster was not ok".
        what: &'static str,
        /// The wait.
        within: std::time::Duration,
    },
    /// A command run to set the servers up failed.
    #[error("{command} failed: {output}")]
    Command {
        /// The command.
        command: &'static str,
        /// What it printed.
        output: String,
    },
    /// No node of a cluster answers.
    #[error("no cluster node answers")]
    NoNode,
}

/// Why the weir Functions library in Redis cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LibraryError {
    /// Redis older than 7.0: no `FUNCTION` or `FCALL`.
    #[error("this Redis has no Functions (FCALL): weir needs Redis 7.0 or newer")]
    NoFunctions,
    /// A library named weir that does not answer `weir_version`.
    #[error(
        "a Functions library named weir without weir_version is loaded: it is not from a compatible weir; replace it with `weir functions load --replace`"
    )]
    Foreign,
    /// The library of another weir build is loaded (refused by a load without replace).
    #[error(
        "the weir library in Redis is {loaded}, this weir's is {ours}; replace it with `weir functions load --replace`"
    )]
    OtherBuild {
        /// The loaded library (protocol, weir version, build).
        loaded: String,
        /// This weir's.
        ours: String,
    },
    /// The loaded library speaks another protocol than this weir.
    #[error(
        "the weir library in Redis is {loaded}, but this weir speaks protocol {ours}: producers using it write jobs this weir may not read; run consumers of a weir that speaks protocol {theirs}, or replace the library with `weir functions load --replace`"
    )]
    Protocol {
        /// The loaded library (protocol, weir version, build).
        loaded: String,
        /// Its protocol.
        theirs: u32,
        /// This weir's protocol.
        ours: u32,
    },
    /// The loaded library's code is not this weir's (its hash differs).
    #[error(
        "the weir library loaded in Redis is not this weir's code (loaded sha1 {loaded_sha1}, this weir's sha1 {ours_sha1}): another build or altered code runs in every producer's FCALL weir_enqueue; reload it as an admin user: `weir functions load --replace`"
    )]
    CodeMismatch {
        /// The SHA-1 of the loaded code.
        loaded_sha1: String,
        /// The SHA-1 of this weir's code.
        ours_sha1: String,
    },
}
