//! Who may use the UI: no start without auth on a non-loopback address, secrets from the
//! environment, auth on every route, loopback host names only without auth, and actions
//! only with this server's CSRF token from its own origin.

use crate::common::*;
use crate::{Ui, seeded};
use base64::Engine;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `weir ui args...` expecting it to refuse at once: exit code and standard error.
fn refused(ctx: &Ctx, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("ui")
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env("WEIR_UI_TEST_EMPTY", "")
        .env("WEIR_UI_TEST_SHORT", "t0k3n")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("weir ui {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn no_start_beyond_loopback_without_auth() {
    let ctx = Ctx::new("noauth").await;
    let port = free_port().to_string();
    for addr in [format!("0.0.0.0:{port}"), format!("192.0.2.10:{port}")] {
        let (code, err) = refused(&ctx, &["--addr", &addr]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("is not a loopback address") && err.contains("--auth"),
            "{err}"
        );
    }
    for (spec, says) in [
        ("basic:admin:WEIR_UI_TEST_UNSET", "WEIR_UI_TEST_UNSET is not set"),
        ("token:WEIR_UI_TEST_EMPTY", "WEIR_UI_TEST_EMPTY is empty"),
        (
            "token:WEIR_UI_TEST_SHORT",
            "the token in WEIR_UI_TEST_SHORT is 5 characters long; a token needs at least 16",
        ),
        ("basic:admin", "not a form weir knows"),
        ("s3cret", "not a form weir knows"),
    ] {
        let (code, err) = refused(&ctx, &["--addr", &format!("127.0.0.1:{port}"), "--auth", spec]);
        assert_eq!(code, 2, "{spec}: {err}");
        assert!(err.contains(says), "{spec}: {err}");
    }
}

/// Form fields or request headers: name and value.
type Fields<'a> = Vec<(&'a str, &'a str)>;

fn basic(user: &str, pass: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    format!("Basic {b}")
}

async fn status(ui: &Ui, path: &str, auth: Option<&str>) -> u16 {
    let mut req = ui.http.get(ui.url(path));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn basic_auth_guards_every_route() {
    let ctx = Ctx::new("basic").await;
    seeded(&ctx, &State::default()).await;
    let ui = Ui::start(
        &ctx,
        &["--auth", "basic:admin:WEIR_UI_TEST_PW"],
        &[("WEIR_UI_TEST_PW", "pa55:word")],
    )
    .await;
    let r = ui.http.get(ui.url("/")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    let good = basic("admin", "pa55:word");
    for path in ["/", "/api/queues", "/static/ui.css", "/no-such-page"] {
        assert_eq!(status(&ui, path, None).await, 401, "{path}");
        assert_eq!(
            status(&ui, path, Some(&basic("admin", "pa55"))).await,
            401,
            "{path}"
        );
        assert_eq!(
            status(&ui, path, Some(&basic("root", "pa55:word"))).await,
            401,
            "{path}"
        );
    }
    assert_eq!(status(&ui, "/", Some(&good)).await, 200);
    assert_eq!(status(&ui, "/api/queues", Some(&good)).await, 200);
    // An action without credentials never reaches its handler.
    let (code, _, _) = ui.post("/queue/pause", &[("queue", &ctx.queue)], &[]).await;
    assert_eq!(code, 401);
    assert!(!ctx.stats().await.paused);
}

#[tokio::test]
async fn token_auth_takes_bearer_or_basic() {
    let ctx = Ctx::new("token").await;
    let ui = Ui::start(
        &ctx,
        &["--auth", "token:WEIR_UI_TEST_TOKEN"],
        &[("WEIR_UI_TEST_TOKEN", "t0k3n-t0k3n-t0k3n")],
    )
    .await;
    assert_eq!(
        status(&ui, "/api/queues", Some("Bearer t0k3n-t0k3n-t0k3n")).await,
        200
    );
    assert_eq!(
        status(&ui, "/", Some(&basic("anyone", "t0k3n-t0k3n-t0k3n"))).await,
        200
    );
    assert_eq!(status(&ui, "/", Some("Bearer t0k3n-t0k3n-t0k3")).await, 401);
    assert_eq!(status(&ui, "/", None).await, 401);
}

#[tokio::test]
async fn without_auth_only_loopback_host_names() {
    let ctx = Ctx::new("host").await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let port = ui.base.rsplit(':').next().unwrap().to_owned();
    let with_host = |h: String| ui.http.get(ui.url("/")).header("host", h).send();
    assert_eq!(
        with_host(format!("evil.example:{port}"))
            .await
            .unwrap()
            .status()
            .as_u16(),
        421
    );
    assert_eq!(
        with_host(format!("localhost:{port}"))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    assert_eq!(
        with_host(format!("[::1]:{port}"))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

#[tokio::test]
async fn actions_need_the_token_and_the_same_origin() {
    let ctx = Ctx::new("csrf").await;
    seeded(&ctx, &State::default().job("a", 0, 5, 1).ready(1, &["a"])).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    let token = ui.token(q).await;
    let ours = ui.base.clone();
    let other = "0".repeat(64);
    let cases: [(&str, Fields, Fields); 4] = [
        ("no token", vec![("queue", q)], vec![]),
        ("another token", vec![("queue", q), ("csrf", &other)], vec![]),
        (
            "another origin",
            vec![("queue", q), ("csrf", &token)],
            vec![("origin", "http://evil.example")],
        ),
        (
            "another site",
            vec![("queue", q), ("csrf", &token)],
            vec![("sec-fetch-site", "cross-site")],
        ),
    ];
    for (case, fields, headers) in &cases {
        let (code, _, body) = ui.post("/queue/pause", fields, headers).await;
        assert_eq!(code, 403, "{case}: {body}");
        assert!(!ctx.stats().await.paused, "{case}");
    }
    let same = [("origin", ours.as_str()), ("sec-fetch-site", "same-origin")];
    let (code, location, _) = ui
        .post("/queue/pause", &[("queue", q), ("csrf", &token)], &same)
        .await;
    assert_eq!(code, 303);
    assert!(location.contains("did=paused"), "{location}");
    assert!(ctx.stats().await.paused);
    // Every answer carries the headers that keep the pages in their own frame and origin.
    let r = ui.http.get(ui.url("/")).send().await.unwrap();
    let h = r.headers();
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(h["x-frame-options"], "DENY");
    // A GET cannot act.
    assert_eq!(
        ui.get(&format!("/queue/resume?queue={q}&csrf={token}")).await.0,
        405
    );
    assert!(ctx.stats().await.paused);
}
