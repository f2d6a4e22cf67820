//! TLS for `https://` handlers: rustls with the `ring` provider (no C crypto build, the
//! same provider as `rediss://`), trusting the system's roots, or only a private CA given
//! as a PEM file. Also the start-up probe: a TCP connect and, for https, a TLS handshake,
//! so a wrong CA or a typo is one line of error before any job is fetched.

use crate::error::HttpError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The roots to trust: those of `ca` (a PEM file) only, or the system's.
pub(crate) fn roots(ca: Option<&Path>) -> Result<RootCertStore, HttpError> {
    match ca {
        Some(path) => ca_roots(path),
        None => system_roots(),
    }
}

/// The client's TLS settings, trusting `roots`. (An `http://` handler gets them too,
/// with no roots: reqwest's TLS connector is built either way, and without them it
/// would look for a process-wide default provider.)
pub(crate) fn client_config(roots: RootCertStore) -> Result<ClientConfig, HttpError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn ca_roots(path: &Path) -> Result<RootCertStore, HttpError> {
    let bad = |reason: String| HttpError::Ca {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in the file".into()));
    }
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| bad(e.to_string()))?;
    }
    Ok(roots)
}

/// The system's roots (what `rustls-native-certs` finds; `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` override). Unreadable entries are skipped; none at all is an error.
fn system_roots() -> Result<RootCertStore, HttpError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map(|e| format!(": {e}")).unwrap_or_default();
        return Err(HttpError::Tls(format!(
            "no system root certificates found{why}; pass a CA file (--http-ca)"
        )));
    }
    Ok(roots)
}

/// Connects to `host:port` and, given `tls`, completes a handshake: no request is sent,
/// so the service sees nothing it could take for a job. `Err` says what failed.
pub(crate) async fn probe(
    host: &str,
    port: u16,
    tls: Option<Arc<ClientConfig>>,
    timeout: Duration,
) -> Result<(), String> {
    let work = async {
        let stream = connect(host, port).await.map_err(|e| e.to_string())?;
        let Some(config) = tls else { return Ok(()) };
        let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map(drop)
            .map_err(|e| format!("TLS handshake failed: {e}"))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no connection within {}",
            humantime::format_duration(timeout)
        )),
    }
}

/// The first address of `host` that takes a TCP connection.
async fn connect(host: &str, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the host name has no address")))
}
