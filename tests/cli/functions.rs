//! `weir functions load [--replace]` and `weir functions status`.

use super::*;

#[tokio::test]
async fn load_then_status_then_a_refused_and_a_forced_replace() {
    let ctx = Ctx::private("cli-fn").await;
    let o = cli(&ctx, &["functions", "status"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("loaded: none"), "{}", text(&o.stdout));

    let o = cli(&ctx, &["functions", "load"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("loaded the weir library: protocol 1 (weir "),
        "{}",
        text(&o.stdout)
    );
    let o = cli(&ctx, &["functions", "load"], "");
    assert!(text(&o.stdout).contains("loaded already"), "{}", text(&o.stdout));
    let o = cli(&ctx, &["functions", "status"], "");
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(
        lines[0].strip_prefix("loaded: "),
        lines[1].strip_prefix("this weir: "),
        "{out}"
    );

    let other = "#!lua name=weir\nredis.register_function{ function_name = 'weir_version', \
                 flags = { 'no-writes' }, callback = function() return { 2, '0.9.0', 'abc' } end }";
    let _: String = ctx.cmd(&["FUNCTION", "LOAD", "REPLACE", other]).await;
    let o = cli(&ctx, &["functions", "load"], "");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        error_lines(&o),
        [format!(
            "error: the weir library in Redis is protocol 2 (weir 0.9.0, build abc), this weir's is {}; \
             replace it with `weir functions load --replace`",
            lines[1]
                .strip_prefix("this weir: ")
                .and_then(|l| l.split(", code sha1 ").next())
                .unwrap()
        )]
    );
    let o = cli(
        &ctx,
        &["work", "--handler", "noop", "--drain", "--no-metrics"],
        "",
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "a consumer refuses the library of another protocol"
    );
    assert!(
        text(&o.stderr).contains("but this weir speaks protocol 1"),
        "{}",
        text(&o.stderr)
    );
    let o = cli(&ctx, &["functions", "load", "--replace"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("replaced protocol 2 (weir 0.9.0, build abc) with protocol 1"));
}
