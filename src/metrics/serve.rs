//! The `/metrics` endpoint: a small HTTP/1.1 server of its own, so that it can do what an
//! endpoint reachable from a browser must. Bound to loopback, it answers loopback host
//! names only (`421` otherwise, the UI's check: [`crate::net::loopback_host`]), so a page
//! of another site that rebinds its name to 127.0.0.1 cannot read queue names. A client
//! has [`HEADER_TIMEOUT`] to send its request head (at most 16 KiB) and at most
//! [`MAX_CONNECTIONS`] are served at once; more are closed at once.

use crate::error::{Error, Result};
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a client has to send its request head, and then to take the answer.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// How often histograms are compacted (what the exporter's own listener did).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Binds `addr` (so a taken port is an error before anything is installed).
pub(super) fn bind(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let fail = |e: std::io::Error| Error::Metrics {
        addr,
        message: e.to_string(),
    };
    let listener = std::net::TcpListener::bind(addr).map_err(fail)?;
    listener.set_nonblocking(true).map_err(fail)?;
    Ok(listener)
}

/// Serves `handle`'s metrics on `listener`, on the current Tokio runtime.
pub(super) fn spawn(listener: std::net::TcpListener, handle: PrometheusHandle) -> Result<()> {
    let addr = listener.local_addr().map_err(|e| Error::Metrics {
        addr: ([0, 0, 0, 0], 0).into(),
        message: e.to_string(),
    })?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| Error::Metrics {
        addr,
        message: format!("{e} (the metrics endpoint needs a Tokio runtime)"),
    })?;
    let loopback = addr.ip().is_loopback();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP_EVERY).await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(async move {
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors, say: wait rather than spin.
                    tracing::debug!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue; // dropped: closed at once
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(2 * HEADER_TIMEOUT, answer(stream, &handle, loopback)).await;
                drop(slot);
            });
        }
    });
    Ok(())
}

/// Reads one request head and answers it; the connection closes after.
async fn answer(mut s: TcpStream, handle: &PrometheusHandle, loopback: bool) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEADER_TIMEOUT, read_head(&mut s)).await {
        Ok(Ok(Some(head))) => head,
        _ => return Ok(()), // too slow, too long or gone
    };
    let head = String::from_utf8_lossy(&head);
    let host = head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("host").then(|| v.trim().to_owned())
    });
    let (status, body) = if loopback && host.as_deref().is_some_and(|h| !crate::net::loopback_host(h)) {
        (
            "421 Misdirected Request",
            "this endpoint answers loopback host names only (localhost, 127.0.0.1, [::1]); \
             bind it to another address (--metrics-addr) to scrape it by another name\n"
                .to_owned(),
        )
    } else if head.starts_with("GET ") {
        ("200 OK", handle.render())
    } else {
        ("405 Method Not Allowed", "GET only\n".to_owned())
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(reply.as_bytes()).await?;
    s.shutdown().await
}

/// The request head, up to the blank line; `None` if the client closed first or sent
/// more than [`MAX_HEAD`] bytes without one.
async fn read_head(s: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}
