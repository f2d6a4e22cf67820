//! A TCP fault proxy between weir and Redis, for the fault tests.
//!
//! It forwards bytes both ways and, on command: drops every open connection, stalls
//! (holds every byte in both directions until released), cuts the next reply from Redis
//! in half and closes that connection, delays every reply, or acts on requests that carry
//! a byte pattern (a script's SHA names the script an `EVALSHA` runs): loses the reply to
//! the next such request (Redis applies it, the client never hears back), or refuses such
//! requests (never forwarded). It runs on its own thread and runtime, so a test may block
//! on child processes while it works; dropping it stops everything.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Counts of what the proxy did.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections closed by `drop_all`.
    pub dropped: AtomicU64,
    /// Replies cut in half.
    pub cut: AtomicU64,
    /// Replies swallowed after their request was applied (`lose_reply_to`).
    pub lost: AtomicU64,
    /// Requests refused (`refuse_requests`).
    pub refused: AtomicU64,
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
    /// Armed by `lose_reply_to`: the next request carrying this pattern loses its reply.
    lose_reply: Mutex<Option<Vec<u8>>>,
    /// Set by `refuse_requests`: requests carrying this pattern are refused.
    refuse: Mutex<Option<Vec<u8>>>,
    /// Added before each chunk Redis sends is forwarded.
    latency: Mutex<Duration>,
}

/// A running proxy; stops on drop.
pub(crate) struct Proxy {
    port: u16,
    state: Arc<State>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub(crate) fn start(upstream_port: u16) -> Self {
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
            lose_reply: Mutex::new(None),
            refuse: Mutex::new(None),
            latency: Mutex::new(Duration::ZERO),
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
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Closes every open connection at once.
    pub(crate) fn drop_all(&self) {
        let mut g = self.state.generation.lock().unwrap();
        g.0.cancel();
        g.0 = CancellationToken::new();
        self.state
            .counts
            .dropped
            .fetch_add(self.state.open.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Connections open now (upstream reached, not yet closed).
    pub(crate) fn open(&self) -> u64 {
        self.state.open.load(Ordering::Relaxed)
    }

    /// Every open connection goes silent for good (bytes are swallowed, nothing is closed),
    /// as when a network path dies without a reset; new connections work.
    pub(crate) fn blackhole_open_connections(&self) {
        let mut g = self.state.generation.lock().unwrap();
        g.1.store(true, Ordering::SeqCst);
        g.1 = Arc::default();
    }

    /// Holds every byte (both ways) while `on`; released bytes flow on in order.
    pub(crate) fn stall(&self, on: bool) {
        self.state.stalled.store(on, Ordering::SeqCst);
    }

    /// The next chunk Redis sends is forwarded only half, then its connection is closed.
    pub(crate) fn cut_next_reply(&self) {
        self.state.cut_next.store(true, Ordering::SeqCst);
    }

    /// True once the armed cut has happened.
    pub(crate) fn cut_done(&self) -> bool {
        !self.state.cut_next.load(Ordering::SeqCst)
    }

    /// The next request that carries `pattern` reaches Redis, but its reply (and anything
    /// after it on that connection) is swallowed and the connection closed: the call was
    /// applied and the client never learns it.
    pub(crate) fn lose_reply_to(&self, pattern: &[u8]) {
        assert!(pattern.len() <= MAX_PATTERN);
        *self.state.lose_reply.lock().unwrap() = Some(pattern.to_vec());
    }

    /// True once the armed lost reply has happened.
    pub(crate) fn reply_lost(&self) -> bool {
        self.state.counts.lost.load(Ordering::SeqCst) > 0
    }

    /// While set, a request carrying `pattern` is never forwarded: its connection is
    /// closed instead (Redis never sees the call). `None` lets them through again.
    pub(crate) fn refuse_requests(&self, pattern: Option<&[u8]>) {
        assert!(pattern.is_none_or(|p| p.len() <= MAX_PATTERN));
        *self.state.refuse.lock().unwrap() = pattern.map(<[u8]>::to_vec);
    }

    /// Every chunk Redis sends is held this long before it is forwarded (per connection,
    /// in order): a slow Redis, or a long network path.
    pub(crate) fn set_latency(&self, d: Duration) {
        *self.state.latency.lock().unwrap() = d;
    }

    /// What the proxy did so far.
    pub(crate) fn counts(&self) -> &Counts {
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
            let conn = Arc::new(Conn {
                holed,
                done,
                lose_next_reply: AtomicBool::new(false),
            });
            let up = pump(cr, sw, false, state.clone(), conn.clone());
            let down = pump(sr, cw, true, state.clone(), conn);
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = async { tokio::join!(up, down) } => {}
            }
            state.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// One proxied connection's shared flags.
struct Conn {
    /// Set to black-hole the connection.
    holed: Arc<AtomicBool>,
    /// Cancelled to close both halves.
    done: CancellationToken,
    /// A request whose reply is to be lost went up: swallow what comes down, then close.
    lose_next_reply: AtomicBool,
}

/// Longest pattern `refuse_requests` and `lose_reply_to` look for (a SHA in hex). The
/// last `MAX_PATTERN - 1` bytes of a chunk are searched again with the next one: a split
/// pattern is found, and a whole one is never found twice.
const MAX_PATTERN: usize = 40;

/// Whether `hay` holds `pattern`.
fn carries(hay: &[u8], pattern: &[u8]) -> bool {
    !pattern.is_empty() && hay.windows(pattern.len()).any(|w| w == pattern)
}

/// Copies `from` to `to` until either side closes or the connection is done; ends the
/// connection when it stops, so both halves close together.
async fn pump<R, W>(mut from: R, mut to: W, from_server: bool, state: Arc<State>, conn: Arc<Conn>)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let done = &conn.done;
    let mut buf = vec![0u8; 64 * 1024];
    let mut tail = Vec::new();
    loop {
        let n = tokio::select! {
            _ = done.cancelled() => break,
            r = from.read(&mut buf) => match r { Ok(0) | Err(_) => break, Ok(n) => n },
        };
        if conn.holed.load(Ordering::SeqCst) {
            continue; // swallowed
        }
        while state.stalled.load(Ordering::SeqCst) && !done.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if done.is_cancelled() {
            break;
        }
        if !from_server {
            // The end of the previous chunk goes first, so a pattern split across two
            // reads is still found.
            tail.extend_from_slice(&buf[..n]);
            let refused = state
                .refuse
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|p| carries(&tail, p));
            if refused {
                state.counts.refused.fetch_add(1, Ordering::SeqCst);
                break;
            }
            let mut armed = state.lose_reply.lock().unwrap();
            if armed.as_ref().is_some_and(|p| carries(&tail, p)) {
                *armed = None;
                conn.lose_next_reply.store(true, Ordering::SeqCst);
            }
            drop(armed);
            let keep = tail.len().min(MAX_PATTERN - 1);
            tail.drain(..tail.len() - keep);
        } else {
            let latency = *state.latency.lock().unwrap();
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if conn.lose_next_reply.load(Ordering::SeqCst) {
                state.counts.lost.fetch_add(1, Ordering::SeqCst);
                break;
            }
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
