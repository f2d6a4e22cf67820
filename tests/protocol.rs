//! docs/protocol.md against the code: the protocol version, the keys in order, every
//! function of the library, the envelope example, and the key lists of the packages in
//! clients/ (no Redis needed).

use weir::queue::functions::PROTOCOL;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::SOURCES;
use weir::{NewJob, Producer};

const DOC: &str = include_str!("../docs/protocol.md");

#[test]
fn the_doc_states_this_protocol_version() {
    assert!(DOC.contains(&format!("Protocol version: {PROTOCOL}\n")));
    assert!(DOC.contains(&format!(
        "FCALL weir_enqueue {} <the {} keys> {}",
        weir::queue::keys::KEY_COUNT + 1,
        weir::queue::keys::KEY_COUNT,
        weir::queue::keys::QUEUES
    )));
    // lib.lua's count of a queue's own keys, after which a script's extra keys follow
    assert!(weir::queue::scripts::LIB.contains(&format!("local NQ = {}\n", weir::queue::keys::KEY_COUNT)));
}

#[test]
fn the_key_table_is_keys_rs_in_order() {
    let documented: Vec<&str> = DOC
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" | ").nth(1))
        .filter(|k| k.starts_with("`weir:{Q}:"))
        .map(|k| k.trim_matches('`'))
        .collect();
    assert_eq!(documented, QueueKeys::new("Q").unwrap().all().to_vec());
}

#[test]
fn every_function_of_the_library_is_named() {
    for s in SOURCES {
        let name = format!("`weir_{}`", s.name);
        assert!(DOC.contains(&name), "docs/protocol.md does not name {name}");
    }
    assert!(DOC.contains("`weir_version`"));
}

#[test]
fn the_envelope_example_is_what_the_producer_writes() {
    let job = NewJob::from_json("send_email", r#"{"to":"a@example.com"}"#)
        .unwrap()
        .id("order-42")
        .unique_for(std::time::Duration::from_secs(60))
        .key("acme");
    let arg = Producer::prepare_offline(job, 1_700_000_000_000, &mut Vec::new()).unwrap();
    let env = String::from_utf8(arg.envelope).unwrap();
    assert!(
        DOC.contains(&format!("```json\n{env}\n```")),
        "the example should read:\n{env}"
    );
}

/// The suffixes of `weir:{Q}:<suffix>`, in order.
fn suffixes() -> Vec<String> {
    let prefix = "weir:{Q}:";
    QueueKeys::new("Q")
        .unwrap()
        .all()
        .iter()
        .map(|k| k[prefix.len()..].to_owned())
        .collect()
}

/// The quoted strings between `start` and the next `end` in `source`.
fn quoted_list(source: &str, start: &str, end: &str, quote: char) -> Vec<String> {
    let from = source
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"))
        + start.len();
    let body = &source[from..from + source[from..].find(end).unwrap()];
    body.split(quote).skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn the_packages_build_the_same_keys() {
    let py = include_str!("../clients/python/weir_producer/__init__.py");
    assert_eq!(
        quoted_list(py, "KEY_SUFFIXES = (", ")", '"'),
        suffixes(),
        "clients/python"
    );
    assert!(py.contains(&format!("PROTOCOL = {PROTOCOL}\n")));
    let js = include_str!("../clients/node/index.js");
    assert_eq!(
        quoted_list(js, "const KEY_SUFFIXES = [", "]", '\''),
        suffixes(),
        "clients/node"
    );
    assert!(js.contains(&format!("const PROTOCOL = {PROTOCOL};")));
}

#[test]
fn the_parked_score_is_the_same_in_fetch_lua_and_fetch_rs() {
    let lua = SOURCES.iter().find(|s| s.name == "fetch").unwrap().body;
    let at = weir::queue::scripts::PARKED_AT_MS;
    assert_eq!(at, 1 << 50);
    assert!(
        lua.contains(&format!("local PARKED_AT = {at}\n")),
        "fetch.lua's PARKED_AT"
    );
    assert!(
        DOC.contains(&format!("2^50 ({at})")),
        "docs/protocol.md's parked score"
    );
}

#[test]
fn the_job_record_keys_are_named_with_their_types() {
    let k = QueueKeys::new("Q").unwrap();
    for (key, kind) in [(k.history(), "HASH"), (k.done(), "ZSET"), (k.results(), "HASH")] {
        assert!(
            DOC.contains(&format!("| `{key}` | {kind} |")),
            "docs/protocol.md should list {key} as a {kind}"
        );
    }
}
