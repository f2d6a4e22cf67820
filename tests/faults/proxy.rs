//! A TCP fault proxy between weir and Redis, for the fault tests.
//!
//! It forwards bytes both ways and, on command: drops every open connection, stalls
//! (holds every byte in both directions until released), or cuts the next reply from
//! Redis in half and closes that connection. It runs on its own thread and runtime, so a
//! test may block on child processes while it works; dropping it stops everything.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Counts of what the proxy did.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections closed by `drop_all`.
    pub dropped: AtomicU64,
    /// Replies cut in half.
    pub cut: AtomicU64,
}

struct State {
    upstream: SocketAddr,
    stalled: AtomicBool,
    cut_next: AtomicBool,
    /// Cancelled (and replaced) to drop every open connection; the flag, set (and
    /// replaced) to black-hole them.
    generation: Mutex<(CancellationToken, Arc<AtomicBool>)>,
    open: AtomicU64,
    counts: Counts,
}

/// A running proxy; stops on drop.
pub struct Proxy {
    port: u16,
    state: Arc<State>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream_port)),
            stalled: AtomicBool::new(false),
            cut_next: AtomicBool::new(false),
            generation: Mutex::new((CancellationToken::new(), Arc::default())),
            open: AtomicU64::new(0),
            counts: Counts::default(),
        });
        let stop = CancellationToken::new();
        let (s, st) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(accept_loop(listener, s, st));
        });
        Self {
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// The proxy's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Closes every open connection at once.
    pub fn drop_all(&self) {
        let mut g = self.state.generation.lock().unwrap();
        g.0.cancel();
        g.0 = CancellationToken::new();
        self.state
            .counts
            .dropped
            .fetch_add(self.state.open.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Every open connection goes silent for good (bytes are swallowed, nothing is closed),
    /// as when a network path dies without a reset; new connections work.
    pub fn blackhole_open_connections(&self) {
        let mut g = self.state.generation.lock().unwrap();
        g.1.store(true, Ordering::SeqCst);
        g.1 = Arc::default();
    }

    /// Holds every byte (both ways) while `on`; released bytes flow on in order.
    pub fn stall(&self, on: bool) {
        self.state.stalled.store(on, Ordering::SeqCst);
    }

    /// The next chunk Redis sends is forwarded only half, then its connection is closed.
    pub fn cut_next_reply(&self) {
        self.state.cut_next.store(true, Ordering::SeqCst);
    }

    /// True once the armed cut has happened.
    pub fn cut_done(&self) -> bool {
        !self.state.cut_next.load(Ordering::SeqCst)
    }

    /// What the proxy did so far.
    pub fn counts(&self) -> &Counts {
        &self.state.counts
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(listener: std::net::TcpListener, state: Arc<State>, stop: CancellationToken) {
    let listener = TcpListener::from_std(listener).unwrap();
    loop {
        let (client, _) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r { Ok(c) => c, Err(_) => continue },
        };
        let (conn_token, holed) = {
            let g = state.generation.lock().unwrap();
            (g.0.child_token(), g.1.clone())
        };
        let stop = stop.clone();
        let state = state.clone();
        state.counts.accepted.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(state.upstream).await else {
                return; // upstream down: the client sees its connection close
            };
            state.open.fetch_add(1, Ordering::Relaxed);
            let done = conn_token.child_token();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = pump(cr, sw, false, state.clone(), holed.clone(), done.clone());
            let down = pump(sr, cw, true, state.clone(), holed, done.clone());
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = async { tokio::join!(up, down) } => {}
            }
            state.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Copies `from` to `to` until either side closes or `done` fires; ends the connection
/// (cancels `done`) when it stops, so both halves close together.
async fn pump<R, W>(
    mut from: R,
    mut to: W,
    from_server: bool,
    state: Arc<State>,
    holed: Arc<AtomicBool>,
    done: CancellationToken,
) where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            _ = done.cancelled() => break,
            r = from.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
        };
        if holed.load(Ordering::SeqCst) {
            continue; // swallowed
        }
        while state.stalled.load(Ordering::SeqCst) && !done.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if done.is_cancelled() {
            break;
        }
        if from_server && n >= 2 && state.cut_next.swap(false, Ordering::SeqCst) {
            let _ = to.write_all(&buf[..n / 2]).await;
            let _ = to.flush().await;
            state.counts.cut.fetch_add(1, Ordering::Relaxed);
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    done.cancel();
    let _ = to.shutdown().await;
}
