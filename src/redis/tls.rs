//! [`TlsFiles`]: the TLS material of a `rediss://` URL, and the client built with it.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// TLS material for a `rediss://` URL, as PEM files: a CA to trust instead of the system
/// roots, and a client certificate with its key for servers that require one
/// (`tls-auth-clients yes`). Reading them needs the `tls` feature (on by default).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TlsFiles {
    /// CA certificate(s) that signed the server's certificate.
    pub ca: Option<PathBuf>,
    /// Client certificate (needs `key`).
    pub cert: Option<PathBuf>,
    /// Client private key (needs `cert`).
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// True when no file is given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    #[cfg(feature = "tls")]
    pub(super) fn load(&self) -> Result<redis::TlsCertificates> {
        let read = |what: &'static str, p: &PathBuf| {
            std::fs::read(p).map_err(|source| Error::TlsFile {
                what,
                path: p.clone(),
                source,
            })
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
                client_cert: read("client certificate", c)?,
                client_key: read("client key", k)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::config(
                    "TLS client certificate and key",
                    "go together: give both, or neither",
                ));
            }
        };
        let root_cert = self.ca.as_ref().map(|p| read("CA file", p)).transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// A client for `url` with the given files: the outer error is about the files, the
/// inner one about the URL.
#[cfg(feature = "tls")]
pub(super) fn client_with_tls(url: &str, tls: &TlsFiles) -> Result<redis::RedisResult<redis::Client>> {
    Ok(redis::Client::build_with_tls(url, tls.load()?))
}

#[cfg(not(feature = "tls"))]
pub(super) fn client_with_tls(_url: &str, _tls: &TlsFiles) -> Result<redis::RedisResult<redis::Client>> {
    Err(Error::config(
        "TLS files",
        "were given, but weir was built without its `tls` feature",
    ))
}
