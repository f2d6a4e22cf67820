//! The simulated downstream over local HTTP (`weir-loadtest serve-downstream`), for
//! handlers that call a real HTTP service. Every request is one `Downstream::call`:
//! `200 OK`, `503` with `Retry-After: 0` when shed, `500` on a baseline error. HTTP/1.1
//! with keep-alive, served by hyper: request bodies are read (up to `MAX_BODY`) and
//! ignored. Loopback only.

use crate::cli::DownstreamOpts;
use crate::downstream::{Downstream, Failure, unix_ms};
use clap::Args;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// Largest request head buffered (bytes; hyper's floor is 8 KiB).
const MAX_HEAD: usize = 16 * 1024;
/// Largest request body read and dropped (bytes); a larger one gets `413`.
const MAX_BODY: usize = 1 << 20;

#[derive(Args, Debug, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on; must be a loopback address (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub downstream: DownstreamOpts,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Serves until interrupted; prints `listening on ADDR` first, for scripts to read.
pub(crate) async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    if !a.listen.ip().is_loopback() {
        anyhow::bail!("--listen must be a loopback address (127.0.0.1 or ::1)");
    }
    let config = a.downstream.config(a.seed).map_err(anyhow::Error::msg)?;
    let ds = Arc::new(Downstream::new(config, unix_ms()));
    let listener = TcpListener::bind(a.listen).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(connection(stream, ds.clone()));
    }
}

/// Answers requests on one connection until the client closes it or breaks the protocol.
async fn connection(stream: TcpStream, ds: Arc<Downstream>) {
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |req| answer(req, ds.clone()));
    let _ = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// One request: its body read and dropped, then one call of the downstream.
async fn answer(req: Request<Incoming>, ds: Arc<Downstream>) -> Result<Response<Full<Bytes>>, Infallible> {
    if Limited::new(req.into_body(), MAX_BODY).collect().await.is_err() {
        return Ok(reply(StatusCode::PAYLOAD_TOO_LARGE, None, "too large"));
    }
    Ok(match ds.call().await {
        Ok(()) => reply(StatusCode::OK, None, "ok"),
        Err(Failure::Overloaded) => reply(StatusCode::SERVICE_UNAVAILABLE, Some(0), "overloaded"),
        Err(Failure::Failed(status)) => reply(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Some(ds.config().retry_after.as_secs()),
            "failed",
        ),
    })
}

fn reply(status: StatusCode, retry_after: Option<u64>, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::builder().status(status);
    if let Some(s) = retry_after {
        r = r.header("retry-after", s);
    }
    r.body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("a status and a number make a valid response")
}
