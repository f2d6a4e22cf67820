//! The simulated downstream over local HTTP (`weir-loadtest serve-downstream`), for
//! handlers that call a real HTTP service. Every request is one `Downstream::call`:
//! `200 OK`, `503` with `Retry-After: 0` when shed, `500` on a baseline error. HTTP/1.1
//! with keep-alive, just enough of it: request bodies are read by `Content-Length` and
//! ignored. Loopback only.

use crate::cli::DownstreamOpts;
use crate::downstream::{Downstream, Failure, unix_ms};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Largest request head accepted (bytes).
const MAX_HEAD: usize = 16 * 1024;
/// Largest request body read and dropped (bytes); a larger one closes the connection.
const MAX_BODY: u64 = 1 << 20;

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

/// Answers requests on one connection until the client closes it or sends garbage.
async fn connection(stream: TcpStream, ds: Arc<Downstream>) {
    let _ = stream.set_nodelay(true);
    let mut stream = BufReader::new(stream);
    while let Ok(Some(body_len)) = read_request(&mut stream).await {
        let mut sink = (&mut stream).take(body_len);
        if tokio::io::copy(&mut sink, &mut tokio::io::sink()).await.is_err() {
            return;
        }
        let response: Vec<u8> = match ds.call().await {
            Ok(()) => b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
            Err(Failure::Overloaded) => {
                b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 0\r\ncontent-length: 10\r\n\r\noverloaded"
                    .to_vec()
            }
            Err(Failure::Failed(status)) => format!(
                "HTTP/1.1 {status} Error\r\nretry-after: {}\r\ncontent-length: 6\r\n\r\nfailed",
                ds.config().retry_after.as_secs()
            )
            .into_bytes(),
        };
        if stream.get_mut().write_all(&response).await.is_err() {
            return;
        }
    }
}

/// Reads one request head; returns its body length, or `None` at a clean close.
async fn read_request(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<u64>> {
    let mut line = String::new();
    let mut head = 0;
    let mut body_len = 0;
    loop {
        line.clear();
        let n = r.read_line(&mut line).await?;
        if n == 0 {
            return Ok(None);
        }
        head += n;
        if head > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            if body_len > MAX_BODY {
                return Err(std::io::Error::other("request body too large"));
            }
            return Ok(Some(body_len));
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            body_len = v.trim().parse().unwrap_or(0);
        }
    }
}
