//! The Functions library (queue/functions.rs): every script registered as `weir_<name>`
//! from the same sources, `weir_enqueue` leaving the state the script leaves, and the
//! version check that refuses a library of another protocol.

use crate::common::*;
use weir::queue::functions::{self, LibraryInfo, Loaded};
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::{EnqueueArg, SOURCES};

/// `FCALL weir_enqueue` with `jobs`, one section per job, as docs/protocol.md lets any
/// client do (the Rust producer groups jobs that share options instead).
pub(crate) async fn fcall_enqueue(
    conn: &mut weir::Conn,
    keys: &QueueKeys,
    jobs: &[EnqueueArg],
) -> weir::Result<Vec<String>> {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg("weir_enqueue")
        .arg(keys.all().len() + 1)
        .arg(keys.all())
        .arg(weir::queue::keys::QUEUES);
    for j in jobs {
        cmd.arg(j.priority as u8)
            .arg(j.delay_ms)
            .arg(j.run_at_ms)
            .arg(u8::from(j.unique))
            .arg(j.unique_for_ms)
            .arg(1)
            .arg(&j.id)
            .arg(&j.envelope);
    }
    Ok(cmd.query_async(conn).await?)
}

/// The library as `FUNCTION LIST` shows it: function name -> flags.
async fn listed(ctx: &Ctx) -> Vec<(String, Vec<String>)> {
    let libs: Vec<redis::Value> = ctx.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "weir"]).await;
    let fields = |v: &redis::Value| -> Vec<redis::Value> {
        match v {
            redis::Value::Array(a) => a.clone(),
            other => panic!("not an array: {other:?}"),
        }
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(), // a function's description is nil
    };
    let lib = fields(&libs[0]);
    let at = |f: &[redis::Value], name: &str| f[f.iter().position(|v| text(v) == name).unwrap() + 1].clone();
    assert_eq!(text(&at(&lib, "library_name")), "weir");
    let mut out: Vec<_> = fields(&at(&lib, "functions"))
        .iter()
        .map(|f| {
            let f = fields(f);
            let flags = fields(&at(&f, "flags")).iter().map(text).collect();
            (text(&at(&f, "name")), flags)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn every_script_is_a_function_and_read_only_ones_say_so() {
    let ctx = Ctx::private("fnlist").await;
    let info = functions::ensure(&mut ctx.c()).await.unwrap();
    assert_eq!(info, Some(LibraryInfo::ours()));
    let mut want: Vec<(String, Vec<String>)> = SOURCES
        .iter()
        .map(|s| {
            let flags = match (s.read_only, s.allow_oom) {
                (true, _) => vec!["no-writes".to_owned()],
                (false, true) => vec!["allow-oom".to_owned()],
                (false, false) => vec![],
            };
            (format!("weir_{}", s.name), flags)
        })
        .collect();
    want.push(("weir_version".into(), vec!["no-writes".into()]));
    want.sort();
    assert_eq!(listed(&ctx).await, want);

    // the queue's keys, then the job records (lib.lua's records)
    let mut keys = ctx.keys.all().to_vec();
    keys.extend([ctx.keys.history(), ctx.keys.done(), ctx.keys.results()]);
    let n = keys.len().to_string();
    let mut args = vec!["FCALL_RO", "weir_stats", &n];
    args.extend(keys.iter().map(String::as_str));
    let stats: Vec<redis::Value> = ctx.cmd(&args).await;
    assert_eq!(stats.len(), 12, "weir_stats runs read-only: {stats:?}");
    args[1] = "weir_enqueue";
    let mut c = redis::cmd(args[0]);
    c.arg(&args[1..]);
    let e = c.query_async::<redis::Value>(&mut ctx.c()).await.unwrap_err();
    assert!(
        e.to_string().contains("write flag"),
        "a writing function refuses FCALL_RO: {e}"
    );
}

#[tokio::test]
async fn another_protocol_is_refused_and_replaced_only_on_request() {
    let ctx = Ctx::private("fnver").await;
    let fake = "#!lua name=weir\nredis.register_function{ function_name = 'weir_version', flags = { 'no-writes' }, \
                callback = function() return { 99, '9.9.9', 'feedbeef' } end }";
    let _: String = ctx.cmd(&["FUNCTION", "LOAD", fake]).await;
    let e = functions::ensure(&mut ctx.c()).await.unwrap_err().to_string();
    assert!(
        e.contains("protocol 99 (weir 9.9.9") && e.contains("speaks protocol 1") && e.contains("--replace"),
        "{e}"
    );
    let e = functions::load(&mut ctx.c(), false)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("--replace"), "{e}");
    let old = match functions::load(&mut ctx.c(), true).await.unwrap() {
        Loaded::Replaced(Some(old)) => old,
        other => panic!("{other:?}"),
    };
    assert_eq!((old.protocol, old.build.as_str()), (99, "feedbeef"));
    assert_eq!(
        functions::load(&mut ctx.c(), false).await.unwrap(),
        Loaded::Current
    );
    assert_eq!(
        functions::ensure(&mut ctx.c()).await.unwrap(),
        Some(LibraryInfo::ours())
    );

    let foreign = "#!lua name=weir\nredis.register_function('something_else', function() return 1 end)";
    let _: String = ctx.cmd(&["FUNCTION", "LOAD", "REPLACE", foreign]).await;
    let e = functions::ensure(&mut ctx.c()).await.unwrap_err().to_string();
    assert!(e.contains("without weir_version"), "{e}");
    assert_eq!(
        functions::load(&mut ctx.c(), true).await.unwrap(),
        Loaded::Replaced(None)
    );

    let _: String = ctx.cmd(&["FUNCTION", "FLUSH"]).await;
    assert_eq!(functions::loaded(&mut ctx.c()).await.unwrap(), None);
    assert_eq!(
        functions::load(&mut ctx.c(), false).await.unwrap(),
        Loaded::Loaded
    );
}

#[tokio::test]
async fn a_consumer_loads_the_library_at_start() {
    let ctx = Ctx::private("fnconsumer").await;
    assert_eq!(functions::loaded(&mut ctx.c()).await.unwrap(), None);
    let mut config = weir::ConsumerConfig::new(&ctx.queue);
    config.drain = true;
    let registry = weir::Registry::new().on("k", weir::handler_fn(|_| async { Ok(()) }));
    let consumer = weir::Consumer::new(config, ctx.redis.clone(), registry).unwrap();
    consumer.run(weir::CancellationToken::new()).await.unwrap();
    assert_eq!(
        functions::loaded(&mut ctx.c()).await.unwrap(),
        Some(LibraryInfo::ours())
    );
}
