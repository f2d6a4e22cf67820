//! The envelope's format: its header order, its decode, keys, and the compact form.

use super::*;

fn sample() -> Vec<u8> {
    let payload = RawValue::from_string(r#"{"to":"a@b.c","n":12345678901234567}"#.into()).unwrap();
    let env = EnvelopeOut {
        attempt: 2,
        max_attempts: 5,
        priority: 0,
        enqueued_at: 1_700_000_000_000,
        id: "j1",
        kind: "email",
        trace_id: None,
        unique_key: None,
        key: None,
        retry: None,
        payload: &payload,
        compact: false,
    };
    let mut buf = Vec::new();
    env.encode_tokens_into(&mut buf);
    buf
}

#[test]
fn header_has_the_fixed_order_scripts_rely_on() {
    let buf = sample();
    let text = std::str::from_utf8(&buf).unwrap();
    assert!(
        text.starts_with(r#"{"attempt":2,"max_attempts":5,"priority":0,"enqueued_at":"#),
        "{text}"
    );
}

#[test]
fn decode_keeps_the_payload_exact() {
    let a = decode("j1", &sample(), 1 << 20).unwrap();
    assert_eq!(a.payload_json(), r#"{"to":"a@b.c","n":12345678901234567}"#);
    let v: serde_json::Value = a.payload().unwrap();
    assert_eq!(v["n"], 12345678901234567u64);
    assert_eq!((a.attempt, a.max_attempts, a.priority()), (2, 5, Priority::High));
    assert_eq!(a.kind, "email");
}

#[test]
fn bad_envelopes_give_reasons() {
    assert!(matches!(
        decode("x", b"not json", 100),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        decode("x", &[b' '; 101], 100),
        Err(DecodeError::TooLarge {
            size: 101,
            limit: 100
        })
    ));
    assert!(matches!(
        decode("other", &sample(), 1 << 20),
        Err(DecodeError::IdMismatch { .. })
    ));
    let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
    let env = format!(
        r#"{{"attempt":0,"max_attempts":1,"priority":1,"enqueued_at":0,"id":"x","kind":"k","payload":{deep}}}"#
    );
    assert!(
        matches!(decode("x", env.as_bytes(), 1 << 20), Err(DecodeError::Invalid(m)) if m.contains("deeper"))
    );
    let ok = env.replace(&deep, &format!(r#"{{"s":"\\\"{}"}}"#, "[{".repeat(200)));
    assert!(
        decode("x", ok.as_bytes(), 1 << 20).is_ok(),
        "brackets in strings do not count"
    );
    // Many openers, little depth: the scan past the quick count.
    let wide = env.replace(&deep, &format!("[{}[]]", "[],".repeat(300)));
    assert!(
        decode("x", wide.as_bytes(), 1 << 20).is_ok(),
        "siblings are not depth"
    );
    // Strings that end in escapes, between the levels of a nesting too deep.
    let level = r#"["\\\\","\\\"[{","#;
    let escaped = env.replace(&deep, &format!("{}0{}", level.repeat(129), "]".repeat(129)));
    assert!(
        matches!(decode("x", escaped.as_bytes(), 1 << 20), Err(DecodeError::Invalid(m)) if m.contains("deeper")),
        "escapes end no string early"
    );
    let shallow = env.replace(&deep, &format!("{}0{}", level.repeat(128), "]".repeat(128)));
    assert!(
        decode("x", shallow.as_bytes(), 1 << 20).is_ok(),
        "128 levels are allowed"
    );
}

fn prepared(job: crate::NewJob) -> crate::Result<String> {
    let arg = crate::Producer::prepare_offline(job, 1_700_000_000_000, &mut Vec::new())?;
    Ok(String::from_utf8(arg.envelope).unwrap())
}

#[test]
fn a_key_goes_after_unique_key_and_before_the_payload() {
    let job = crate::NewJob::from_json("email", r#"{"key":"not this one"}"#)
        .unwrap()
        .id("j1")
        .trace_id("t1")
        .unique_for(std::time::Duration::from_secs(60))
        .key("tenant-7.eu:a_b");
    assert_eq!(
        prepared(job).unwrap(),
        r#"{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":1700000000000,"id":"j1","kind":"email","trace_id":"t1","unique_key":"j1","key":"tenant-7.eu:a_b","payload":{"key":"not this one"}}"#
    );
}

#[test]
fn a_key_round_trips_and_no_key_writes_nothing() {
    let with = prepared(crate::NewJob::from_json("k", "[1]").unwrap().id("a").key("acme")).unwrap();
    let job = decode("a", with.as_bytes(), 1 << 20).unwrap();
    assert_eq!(job.key.as_deref(), Some("acme"));
    assert_eq!(job.payload_json(), "[1]");

    let without = prepared(crate::NewJob::from_json("k", "[1]").unwrap().id("a")).unwrap();
    assert!(!without.contains(r#""key""#), "{without}");
    assert_eq!(
        with.replace(r#","key":"acme""#, ""),
        without,
        "the header is unchanged"
    );
    assert_eq!(decode("a", without.as_bytes(), 1 << 20).unwrap().key, None);
}

#[test]
fn a_bad_key_is_refused_before_anything_is_encoded() {
    let long = "k".repeat(MAX_ID_LEN + 1);
    for bad in ["", "a b", "a\"b", "tenant/1", "ключ", long.as_str()] {
        let job = crate::NewJob::from_json("k", "1").unwrap().key(bad);
        let err = prepared(job).unwrap_err();
        assert!(
            matches!(&err, crate::Error::InvalidName { what: "job key", .. }),
            "{bad:?}: {err}"
        );
    }
    let longest = "k".repeat(MAX_ID_LEN);
    assert!(prepared(crate::NewJob::from_json("k", "1").unwrap().key(longest)).is_ok());
}

/// A compact envelope of `id` (a time id of `at`, or any id) with a key.
fn compact_of(id: &str, at: u64, full: bool) -> Vec<u8> {
    let payload = RawValue::from_string(r#"{"n":[1,2]}"#.into()).unwrap();
    let env = EnvelopeOut {
        attempt: 0,
        max_attempts: DEFAULT_MAX_ATTEMPTS,
        priority: Priority::Normal as u8,
        enqueued_at: at,
        id,
        kind: "email",
        trace_id: None,
        unique_key: None,
        key: Some("acme"),
        retry: None,
        payload: &payload,
        compact: !full,
    };
    let mut buf = Vec::new();
    env.encode_tokens_into(&mut buf);
    buf
}

fn time_id(at: u64) -> String {
    let mut id = String::new();
    push_time_id(&mut id, at);
    id
}

#[test]
fn a_compact_envelope_reads_as_its_full_form() {
    let at = 1_796_000_000_123;
    let id = time_id(at);
    let compact = compact_of(&id, at, false);
    let full = compact_of(&id, at, true);
    assert_eq!(
        String::from_utf8(compact.clone()).unwrap(),
        format!(r#"{{"id":"{id}","kind":"email","key":"acme","payload":{{"n":[1,2]}}}}"#)
    );
    // the four numbers, less the 9 bytes of the time in the id: 61 fewer than a plain id's
    assert_eq!(full.len() - compact.len(), 70, "the bytes the compact form saves");
    let (c, f) = (
        decode(&id, &compact, 1 << 20).unwrap(),
        decode(&id, &full, 1 << 20).unwrap(),
    );
    let fields = |j: &Job| {
        (
            j.attempt,
            j.max_attempts,
            j.priority(),
            j.enqueued_at_ms,
            j.id.clone(),
            j.kind.clone(),
            j.key.clone(),
            j.payload_json().to_owned(),
        )
    };
    assert_eq!(fields(&c), fields(&f));
    assert_eq!((c.attempt, c.max_attempts, c.enqueued_at_ms), (0, 5, at));
    // serde_json's reading (an escape sends it there) gives the same implied values.
    let escaped = String::from_utf8(compact)
        .unwrap()
        .replace("[1,2]", r#"[1,"\u0032"]"#);
    let s = decode(&id, escaped.as_bytes(), 1 << 20).unwrap();
    assert_eq!(
        (s.attempt, s.max_attempts, s.priority(), s.enqueued_at_ms),
        (0, 5, Priority::Normal, at)
    );
    let inline = decode_inline(&escaped, 1 << 20).unwrap();
    assert_eq!(inline.enqueued_at_ms, at, "an inline job's time, from its id too");
}

#[test]
fn only_what_the_compact_form_says_exactly_is_written_compact() {
    let at = 1_796_000_000_123;
    let id = time_id(at);
    let payload = RawValue::from_string("1".into()).unwrap();
    let base = EnvelopeOut {
        attempt: 0,
        max_attempts: 5,
        priority: 1,
        enqueued_at: at,
        id: &id,
        kind: "k",
        trace_id: None,
        unique_key: None,
        key: None,
        retry: None,
        payload: &payload,
        compact: true,
    };
    assert!(base.is_compact());
    for (why, env) in [
        (
            "not asked for",
            EnvelopeOut {
                compact: false,
                ..base
            },
        ),
        ("a retry", EnvelopeOut { attempt: 1, ..base }),
        (
            "other attempts",
            EnvelopeOut {
                max_attempts: 3,
                ..base
            },
        ),
        ("high priority", EnvelopeOut { priority: 0, ..base }),
        ("low priority", EnvelopeOut { priority: 2, ..base }),
    ] {
        assert!(!env.is_compact(), "{why}");
        let mut buf = Vec::new();
        env.encode_tokens_into(&mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            serde_json::to_string(&env).unwrap(),
            "{why}: the full form"
        );
    }
}

#[test]
fn a_compact_envelope_without_a_time_id_has_no_time() {
    let env = br#"{"id":"order-1","kind":"k","payload":1}"#;
    let job = decode("order-1", env, 1 << 20).unwrap();
    assert_eq!((job.attempt, job.max_attempts, job.enqueued_at_ms), (0, 5, 0));
}

#[test]
fn a_compact_envelope_naming_an_implied_field_is_refused() {
    for named in [
        r#""attempt":3"#,
        r#""max_attempts":9"#,
        r#""priority":0"#,
        r#""enqueued_at":1"#,
    ] {
        let env = format!(r#"{{"id":"j-1","kind":"k",{named},"payload":1}}"#);
        let field = &named[1..named.find("\":").unwrap()];
        for got in [
            decode("j-1", env.as_bytes(), 1 << 20),
            decode_inline(&env, 1 << 20),
        ] {
            match got {
                Err(DecodeError::Invalid(why)) => {
                    assert!(
                        why.contains(&format!("names {field}, a field its form implies")),
                        "{why}"
                    )
                }
                other => panic!("{env}: {other:?}"),
            }
        }
    }
    // The same names in the payload, and the full form in another order, are read.
    let env = r#"{"id":"j-1","kind":"k","payload":{"x":1,"attempt":3,"priority":0}}"#;
    let job = decode("j-1", env.as_bytes(), 1 << 20).unwrap();
    assert_eq!((job.attempt, job.priority()), (0, Priority::Normal));
    let env =
        r#"{"kind":"k","id":"j-1","attempt":2,"max_attempts":4,"priority":2,"enqueued_at":7,"payload":1}"#;
    let job = decode("j-1", env.as_bytes(), 1 << 20).unwrap();
    assert_eq!(
        (job.attempt, job.max_attempts, job.priority()),
        (2, 4, Priority::Low)
    );
}
