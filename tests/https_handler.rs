//! The HTTP handler over TLS: a local HTTPS server with a certificate from a CA this test
//! generates (rcgen), which answers 401 unless the request carries the expected
//! `Authorization` header and a valid `X-Weir-Signature`. With `--http-ca` the handler
//! delivers every job; with the wrong CA it fails at start with one clear line and
//! fetches nothing; a secret from the environment never shows on standard error, even
//! at trace level.

mod common;
mod faults;

use common::Ctx;
use faults::run_weir_env;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use weir::handler::http::{HttpConfig, HttpHandler, HttpHeader, Secret};
use weir::{BatchHandler, Handler, Job, JobErrorKind, NewJob};

const TOKEN: &str = "tok-3f9a1c77e2";
const SIGN: &str = "sig-5b0d2e81aa";
const T: Duration = Duration::from_secs(60);

/// A CA and a server certificate for 127.0.0.1, plus a second CA that signed nothing
/// here (the "wrong" one), as PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    server_cert: String,
    server_key: String,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = |name: &str| {
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name = subject(name);
            let key = KeyPair::generate().unwrap();
            let cert = p.self_signed(&key).unwrap();
            (cert.pem(), Issuer::new(p, key))
        };
        let (ca_pem, issuer) = ca("weir test CA");
        let (wrong_pem, _) = ca("some other CA");
        std::fs::write(dir.path().join("ca.pem"), ca_pem).unwrap();
        std::fs::write(dir.path().join("wrong.pem"), wrong_pem).unwrap();
        let mut p = CertificateParams::new(vec!["127.0.0.1".into()]).unwrap();
        p.distinguished_name = subject("hook server");
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &issuer).unwrap();
        Self {
            dir,
            server_cert: cert.pem(),
            server_key: key.serialize_pem(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn subject(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    authorized: bool,
    signed: bool,
    body: serde_json::Value,
}

/// The HTTPS server: checks `Authorization: Bearer TOKEN` and the signature.
#[derive(Default)]
struct Server {
    seen: Mutex<Vec<Seen>>,
    handshakes: Mutex<usize>,
}

impl Server {
    async fn start(pki: &Pki) -> (Arc<Self>, String) {
        let certs = vec![CertificateDer::from_pem_slice(pki.server_cert.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(pki.server_key.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/hook", listener.local_addr().unwrap());
        let server = Arc::new(Server::default());
        let s = server.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, s) = (acceptor.clone(), s.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    *s.handshakes.lock().unwrap() += 1;
                    let svc = service_fn(move |req| s.clone().answer(req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        (server, url)
    }

    async fn answer(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let header = |n: &str| {
            req.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let authorized = header("authorization") == Some(format!("Bearer {TOKEN}"));
        let signature = header("x-weir-signature");
        let bytes = req.into_body().collect().await.unwrap().to_bytes();
        let signed = signature.is_some_and(|s| verify(&s, &bytes));
        let body = serde_json::from_slice(&bytes).unwrap_or_default();
        self.seen.lock().unwrap().push(Seen {
            authorized,
            signed,
            body,
        });
        let status = if authorized && signed {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        Ok(Response::builder().status(status).body(Full::default()).unwrap())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Checks `t=<secs>,v1=<hex>` the way a receiver would: HMAC-SHA256 of "<t>.<body>",
/// compared in constant time, `t` within 5 minutes of now.
fn verify(header: &str, body: &[u8]) -> bool {
    let Some((t, v1)) = header.strip_prefix("t=").and_then(|r| r.split_once(",v1=")) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let Ok(secs) = t.parse::<u64>() else { return false };
    if now.abs_diff(secs) > 300 || v1.len() != 64 {
        return false;
    }
    let Ok(tag) = (0..32)
        .map(|i| u8::from_str_radix(&v1[2 * i..2 * i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
    else {
        return false;
    };
    let mut msg = format!("{t}.").into_bytes();
    msg.extend_from_slice(body);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SIGN.as_bytes());
    ring::hmac::verify(&key, &msg, &tag).is_ok()
}

/// Runs `weir args...` with `env` off the runtime's threads (the server answers meanwhile).
async fn weir(args: Vec<String>, env: Vec<(&'static str, &'static str)>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_weir_env(&args, &env, None, T)
    })
    .await
    .unwrap()
}

/// `weir work` on the test's queue with `handler`, then `more` arguments.
fn work_args(ctx: &Ctx, handler: &str, more: &[&str]) -> Vec<String> {
    let base = [
        "work",
        "--redis-url",
        &ctx.url,
        "-q",
        &ctx.queue,
        "--handler",
        handler,
    ];
    base.iter().chain(more).map(|s| s.to_string()).collect()
}

fn job(id: &str) -> Job {
    let env = format!(
        r#"{{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":0,"id":"{id}","kind":"hook","payload":{{"n":"{id}"}}}}"#
    );
    serde_json::from_str(&env).unwrap()
}

fn config(url: &str, ca: PathBuf) -> HttpConfig {
    let mut c = HttpConfig::new(url);
    c.ca_file = Some(ca);
    c.timeout = Duration::from_secs(10);
    let token = move |v: &str| (v == "TOKEN").then(|| TOKEN.to_owned());
    c.headers
        .push(HttpHeader::parse_with("Authorization: Bearer $TOKEN", token).unwrap());
    c.sign_secret = Some(Secret::new(SIGN));
    c
}

#[tokio::test]
async fn delivers_with_a_private_ca_a_header_and_a_signature() {
    let pki = Pki::new();
    let (server, url) = Server::start(&pki).await;
    let h = HttpHandler::new(config(&url, pki.path("ca.pem"))).unwrap();
    h.probe(T).await.unwrap();
    assert_eq!(Handler::call(&h, job("a")).await, Ok(()));
    let batch = h.clone().batched();
    let results = BatchHandler::call(&batch, vec![job("b"), job("c")]).await;
    assert_eq!(results, vec![Ok(()), Ok(())]);
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|s| s.authorized && s.signed), "{seen:?}");
    assert_eq!(seen[0].body["id"], "a");
    assert_eq!(seen[1].body[1]["payload"]["n"], "c");
    let shown = format!("{h:?}");
    assert!(!shown.contains(TOKEN) && !shown.contains(SIGN), "{shown}");

    // Without the signature the server refuses: the check above is a real one.
    let mut unsigned = config(&url, pki.path("ca.pem"));
    unsigned.sign_secret = None;
    let e = Handler::call(&HttpHandler::new(unsigned).unwrap(), job("d"))
        .await
        .unwrap_err();
    assert!(e.message.starts_with("HTTP 401"), "{e:?}");
}

#[tokio::test]
async fn a_wrong_ca_fails_clearly_and_the_job_is_retried_not_lost() {
    let pki = Pki::new();
    let (server, url) = Server::start(&pki).await;
    let h = HttpHandler::new(config(&url, pki.path("wrong.pem"))).unwrap();
    let e = h.probe(T).await.unwrap_err().to_string();
    assert!(
        e.contains("TLS handshake failed") && e.contains("UnknownIssuer"),
        "{e}"
    );
    let e = Handler::call(&h, job("a")).await.unwrap_err();
    assert!(e.is_retryable() && e.kind != JobErrorKind::Backpressure, "{e:?}");
    assert!(e.message.contains("UnknownIssuer"), "{e:?}");
    assert!(server.seen().is_empty(), "nothing reached the server");

    let e = HttpHandler::new(config(&url, pki.path("missing.pem"))).unwrap_err();
    assert!(e.to_string().starts_with("cannot read the CA file"), "{e}");
}

/// `weir work` end to end: a secret from the environment, a private CA, a signature.
#[tokio::test]
async fn weir_work_delivers_over_https_and_never_shows_the_secrets() {
    let ctx = Ctx::new("https-work").await;
    let pki = Pki::new();
    let (server, url) = Server::start(&pki).await;
    let jobs = (0..20).map(|i| NewJob::new("hook", &i).unwrap().id(format!("j{i}")));
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let ca = pki.path("ca.pem");
    let more = [
        "--http-ca",
        ca.to_str().unwrap(),
        "--header",
        "Authorization: Bearer $TOKEN",
        "--sign-secret-env",
        "SIGN",
        "--drain",
        "--no-metrics",
    ];
    let env = vec![("TOKEN", TOKEN), ("SIGN", SIGN), ("WEIR_LOG", "trace")];
    let (code, stdout, stderr) = weir(work_args(&ctx, &url, &more), env).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("20 acked"), "{stdout}");
    assert!(
        !stderr.contains(TOKEN) && !stderr.contains(SIGN),
        "a secret leaked"
    );
    assert!(
        !stdout.contains(TOKEN) && !stdout.contains(SIGN),
        "a secret leaked"
    );
    let seen = server.seen();
    assert!(seen.iter().all(|s| s.authorized && s.signed), "{seen:?}");
    let mut ids: Vec<String> = seen
        .iter()
        .map(|s| s.body["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);
    let s = ctx.stats().await;
    assert_eq!((s.pending(), s.dead), (0, 0));
}

/// The wrong CA: one line of error, exit 1, every job still ready.
#[tokio::test]
async fn weir_work_with_a_wrong_ca_fetches_nothing() {
    let ctx = Ctx::new("https-wrong-ca").await;
    let pki = Pki::new();
    let (server, url) = Server::start(&pki).await;
    let jobs = (0..5).map(|i| NewJob::new("hook", &i).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let wrong = pki.path("wrong.pem");
    let more = [
        "--http-ca",
        wrong.to_str().unwrap(),
        "--header",
        "Authorization: Bearer $TOKEN",
        "--drain",
        "--no-metrics",
    ];
    let (code, _, stderr) = weir(work_args(&ctx, &url, &more), vec![("TOKEN", TOKEN)]).await;
    assert_eq!(code, 1, "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!("cannot reach the handler at {url}"))
            && errors[0].contains("TLS handshake failed")
            && errors[0].contains("no job was fetched"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
    assert!(server.seen().is_empty());
    let s = ctx.stats().await;
    assert_eq!((s.ready_total(), s.dead), (5, 0), "{s:?}");
}

/// A header naming an unset variable is a usage error that names the variable.
#[tokio::test]
async fn an_unset_variable_is_a_usage_error() {
    let ctx = Ctx::new("https-unset").await;
    let more = ["--header", "Authorization: Bearer $WEIR_TEST_UNSET_TOKEN"];
    let args = work_args(&ctx, "https://127.0.0.1:9/hook", &more);
    let (code, _, stderr) = weir(args, vec![]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("environment variable WEIR_TEST_UNSET_TOKEN is not set"),
        "{stderr}"
    );
}
