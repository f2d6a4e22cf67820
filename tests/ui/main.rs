//! `weir ui` against the test redis-server: the `/api/` endpoints answer what the
//! commands' `--json` prints, the pages escape what Redis holds, actions need the CSRF
//! token and a same-origin request, deletes ask first, limits go through the command's
//! checks, and the server refuses to start without auth on a non-loopback address.
//! (tests/ui/browser drives the pages in a real browser.)

#[path = "../common/mod.rs"]
mod common;

mod actions;
mod api;
mod hostile;
mod partitions;
mod retry;
mod samples;
mod security;

use common::*;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A running `weir ui`, killed on drop.
pub(crate) struct Ui {
    child: Child,
    pub base: String,
    pub http: reqwest::Client,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ui {
    /// `weir ui` on a free loopback port over `ctx`'s Redis, with `extra` arguments and
    /// environment, once it answers.
    pub(crate) async fn start(ctx: &Ctx, extra: &[&str], env: &[(&str, &str)]) -> Ui {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        // The client first, so a failure here leaves no server behind. weir's reqwest has
        // rustls without a default crypto provider (weir's HTTP handler passes its own):
        // this plain-http client needs one installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["ui", "--addr", &addr, "--refresh", "0s"])
            .args(extra)
            .env("REDIS_URL", &ctx.url)
            .envs(env.iter().copied())
            .env_remove("WEIR_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("weir ui runs");
        let ui = Ui {
            child,
            base: format!("http://{addr}"),
            http,
        };
        wait_until("weir ui listens", Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(&addr).await.is_ok()
        })
        .await;
        ui
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `path`: status and body.
    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// GET `path` as JSON (status 200 expected).
    pub(crate) async fn json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The CSRF token the forms of `queue`'s page carry.
    pub(crate) async fn token(&self, queue: &str) -> String {
        let (_, body) = self.get(&format!("/queue?queue={queue}")).await;
        let at = body.find(r#"name="csrf" value=""#).expect("a form with a token") + 19;
        body[at..at + 64].to_owned()
    }

    /// POSTs `fields` as a form to `path` with `headers`: status, Location, body.
    pub(crate) async fn post(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> (u16, String, String) {
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect();
        let mut req = self
            .http
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let location = r
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, location, r.text().await.unwrap())
    }
}

/// Percent-encodes a form value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `weir args...` against `ctx`'s Redis.
pub(crate) fn cli(ctx: &Ctx, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env_remove("WEIR_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("weir runs")
}

/// Registers `ctx`'s queue (as an enqueue would) and seeds `state` into it.
pub(crate) async fn seeded(ctx: &Ctx, state: &State) {
    let _: u64 = ctx.cmd(&["SADD", "weir:queues", &ctx.queue]).await;
    seed(&mut ctx.c(), &ctx.keys, state).await;
}
