//! A local HTTP server for the HTTP handler's tests. Each job's payload says how to
//! answer: `{"do": "ok" | "slow:<ms>" | "429" | "429-once" | "503" | "500" | "500-once" |
//! "400" | "redirect" | "hang"}` (`-once`: only to the first request for the job's id).
//! Past `max_in_flight` concurrent requests, or until [`Server::busy_for`] runs out, it
//! answers 429. It counts connections and requests, and records when each request came
//! and the most requests it was ever answering at once.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub idempotency_key: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
}

#[derive(Default)]
pub(crate) struct Server {
    pub addr: Mutex<Option<SocketAddr>>,
    pub connections: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    /// The most requests it was answering at once.
    pub peak_in_flight: AtomicUsize,
    /// When each request came, in order.
    pub arrivals: Mutex<Vec<Instant>>,
    pub seen: Mutex<Vec<Seen>>,
    /// Requests so far per job id (a batch counts for its first job).
    pub tries: Mutex<HashMap<String, usize>>,
    /// Until then, every request is answered 429 with `Retry-After: 1`.
    pub busy_until: Mutex<Option<Instant>>,
}

impl Server {
    pub(crate) async fn start() -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = Arc::new(Server {
            addr: Mutex::new(Some(listener.local_addr().unwrap())),
            max_in_flight: AtomicUsize::new(usize::MAX),
            ..Default::default()
        });
        let server = s.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                server.connections.fetch_add(1, Ordering::SeqCst);
                let server = server.clone();
                let svc = service_fn(move |req| server.clone().answer(req));
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
            }
        });
        s
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/hook", self.addr.lock().unwrap().unwrap())
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Answers 429 (`Retry-After: 1`) to every request for `d` from now.
    pub(crate) fn busy_for(&self, d: Duration) {
        *self.busy_until.lock().unwrap() = Some(Instant::now() + d);
    }

    async fn answer(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let header = |n: &str| {
            req.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (idempotency_key, content_type) = (header("idempotency-key"), header("content-type"));
        let bytes = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let first = if body.is_array() {
            body[0].clone()
        } else {
            body.clone()
        };
        let id = first["id"].as_str().unwrap_or_default().to_owned();
        self.arrivals.lock().unwrap().push(Instant::now());
        self.seen.lock().unwrap().push(Seen {
            idempotency_key,
            content_type,
            body,
        });
        let tries = {
            let mut t = self.tries.lock().unwrap();
            let n = t.entry(id).or_insert(0);
            *n += 1;
            *n
        };
        let busy = self
            .busy_until
            .lock()
            .unwrap()
            .is_some_and(|t| Instant::now() < t);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        let r = if busy {
            reply(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", "1")], "busy")
        } else if now > self.max_in_flight.load(Ordering::SeqCst) {
            reply(
                StatusCode::TOO_MANY_REQUESTS,
                &[("retry-after", "0")],
                "slow down",
            )
        } else {
            Self::by_mode(&first, tries == 1).await
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(r)
    }

    async fn by_mode(job: &Value, first_try: bool) -> Response<Full<Bytes>> {
        let mode = job["payload"]["do"].as_str().unwrap_or("ok");
        match mode {
            "429" => reply(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", "7")], "busy"),
            "429-once" if first_try => reply(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", "0")], ""),
            "503" => reply(StatusCode::SERVICE_UNAVAILABLE, &[], "down"),
            "500" => reply(StatusCode::INTERNAL_SERVER_ERROR, &[], "oops"),
            "500-once" if first_try => reply(StatusCode::INTERNAL_SERVER_ERROR, &[], "oops"),
            "400" => {
                let body = format!("bad field 'x'{}", "y".repeat(5000));
                reply(StatusCode::BAD_REQUEST, &[], &body)
            }
            "redirect" => reply(StatusCode::FOUND, &[("location", "/elsewhere")], ""),
            "echo" => {
                let body = format!("{{\"id\":{},\"pad\":\"{}\"}}", job["id"], "z".repeat(1000));
                reply(StatusCode::OK, &[], &body)
            }
            "hang" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                reply(StatusCode::OK, &[], "")
            }
            m => {
                if let Some(ms) = m.strip_prefix("slow:").and_then(|ms| ms.parse().ok()) {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                reply(StatusCode::OK, &[], "{\"ok\":true}")
            }
        }
    }
}

fn reply(status: StatusCode, headers: &[(&str, &str)], body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::builder().status(status);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Full::new(Bytes::from(body.to_owned()))).unwrap()
}
