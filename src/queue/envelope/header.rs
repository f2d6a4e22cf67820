//! The envelope's header read by hand where it is exactly as weir writes it: the fields
//! in their order (`EnvelopeOut`), no whitespace, numbers as plain digits, strings without
//! escapes. Anything else, or anything this reader is not sure of, goes to serde_json,
//! which decides; so the result is the one serde_json gives, with less work per job
//! (callgrind, `weir work --drain` of 40,000 jobs: serde_json's nine string reads and
//! field matches per envelope were the largest part of the consumer's instructions).
//!
//! The payload is still parsed in full, by serde_json, so every job handed to a handler
//! carries valid JSON, as before.

use super::Job;
use serde_json::value::RawValue;

/// The job in `bytes` when its header is canonical and its payload valid JSON; `None`
/// sends the envelope to serde_json.
pub(super) fn canonical(bytes: &[u8]) -> Option<Job> {
    canonical_text(std::str::from_utf8(bytes).ok()?)
}

/// [`canonical`] of text.
pub(super) fn canonical_text(text: &str) -> Option<Job> {
    let mut r = Reader { text, at: 0 };
    // The compact form's implied numbers, or the full form's own.
    let (attempt, max_attempts, priority_raw, enqueued_at_ms) = if r.literal("{\"id\":").is_some() {
        (
            0,
            u64::from(super::default_max_attempts()),
            u64::from(super::normal()),
            0,
        )
    } else {
        r.literal("{\"attempt\":")?;
        let attempt = r.whole()?;
        r.literal(",\"max_attempts\":")?;
        let max_attempts = r.whole()?;
        r.literal(",\"priority\":")?;
        let priority_raw = r.whole()?;
        r.literal(",\"enqueued_at\":")?;
        let enqueued_at_ms = r.whole()?;
        r.literal(",\"id\":")?;
        (attempt, max_attempts, priority_raw, enqueued_at_ms)
    };
    let id = r.string()?;
    r.literal(",\"kind\":")?;
    let kind = r.string()?;
    let trace_id = r.optional(",\"trace_id\":")?;
    let unique_key = r.optional(",\"unique_key\":")?;
    let key = r.optional(",\"key\":")?;
    let retry = r.optional(",\"retry\":")?;
    r.literal(",\"payload\":")?;
    // The payload runs to the envelope's closing brace, its last byte.
    let raw = text.get(r.at..text.len().checked_sub(1)?)?;
    if !text.ends_with('}') {
        return None;
    }
    // Borrowed, then copied: serde_json buffers nothing on the way.
    let payload: Box<RawValue> = serde_json::from_str::<&RawValue>(raw).ok()?.to_owned();
    // Whitespace around it would be dropped here and there alike; leave it to serde_json.
    if payload.get().len() != raw.len() {
        return None;
    }
    Some(Job {
        attempt: attempt.try_into().ok()?,
        max_attempts: max_attempts.try_into().ok()?,
        priority_raw: priority_raw.try_into().ok()?,
        enqueued_at_ms,
        id: id.to_owned(),
        kind: kind.to_owned(),
        trace_id: trace_id.map(str::to_owned),
        unique_key: unique_key.map(str::to_owned),
        key: key.map(str::to_owned),
        retry: retry.map(str::to_owned),
        payload,
        suspect: false,
        lease: 0,
        result: None,
        start: None,
    })
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn literal(&mut self, s: &str) -> Option<()> {
        self.rest().starts_with(s).then(|| self.at += s.len())
    }

    /// A whole number as JSON writes it (digits, no leading zero) that fits a u64.
    fn whole(&mut self) -> Option<u64> {
        let rest = &self.text.as_bytes()[self.at..];
        let (mut n, mut digits) = (0u64, 0);
        for &b in rest.iter().take_while(|b| b.is_ascii_digit()) {
            n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            digits += 1;
        }
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        self.at += digits;
        Some(n)
    }

    /// A string without escapes or control characters (JSON forbids them raw): its text.
    fn string(&mut self) -> Option<&'a str> {
        let rest = self.rest().strip_prefix('"')?;
        let end = rest.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest.as_bytes()[end] != b'"' {
            return None;
        }
        self.at += end + 2;
        Some(&rest[..end])
    }

    /// An optional string field `name` (with its leading comma): absent is `Some(None)`.
    fn optional(&mut self, name: &str) -> Option<Option<&'a str>> {
        if !self.rest().starts_with(name) {
            return Some(None);
        }
        self.at += name.len();
        self.string().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::canonical;
    use crate::queue::envelope::{EnvelopeOut, Job};
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    fn fields(j: &Job) -> String {
        format!(
            "{} {} {} {} {:?} {:?} {:?} {:?} {:?} {:?} {}",
            j.attempt,
            j.max_attempts,
            j.priority_raw,
            j.enqueued_at_ms,
            j.id,
            j.kind,
            j.trace_id,
            j.unique_key,
            j.key,
            j.retry,
            j.payload.get()
        )
    }

    /// serde_json's verdict on `bytes`, as `fields`, or None.
    fn by_serde(bytes: &[u8]) -> Option<String> {
        serde_json::from_slice::<Job>(bytes).ok().map(|j| fields(&j))
    }

    #[test]
    fn reads_what_weir_writes_and_leaves_the_rest_to_serde_json() {
        let env = br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1700000000000,"id":"a-1","kind":"email","key":"acme","payload":{"to":"x@y","n":[1,2]}}"#;
        let j = canonical(env).unwrap();
        assert_eq!(Some(fields(&j)), by_serde(env));
        assert_eq!((j.kind.as_str(), j.key.as_deref()), ("email", Some("acme")));
        for other in [
            // whitespace, another order, an escape, a leading zero, an unknown field,
            // a null, a payload that is not JSON, trailing bytes
            &br#"{"attempt": 2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1}"#[..],
            br#"{"max_attempts":25,"attempt":2,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1}"#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k\"q","payload":1}"#,
            br#"{"attempt":02,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1}"#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","x":1,"payload":1}"#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","trace_id":null,"payload":1}"#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":{"a":}}"#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1} "#,
            br#"{"attempt":2,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1,"payload":2}"#,
            br#"{"attempt":4294967296,"max_attempts":25,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":1}"#,
        ] {
            assert!(canonical(other).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }

    fn token() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_.:-]{1,20}"
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever weir writes, read by hand, is what serde_json reads.
        #[test]
        fn agrees_with_serde_json_on_what_weir_writes(
            attempt in any::<u32>(), max in any::<u32>(), priority in 0u8..3, at in any::<u64>(),
            id in token(), kind in any::<String>(), trace in proptest::option::of(any::<String>()),
            unique in proptest::option::of(token()), key in proptest::option::of(token()),
            retry in proptest::option::of("(fixed|exp):[a-z0-9=.,]{1,20}"),
            payload in any::<String>(),
        ) {
            let raw = serde_json::to_string(&serde_json::json!({ "s": payload, "n": at })).unwrap();
            let raw = RawValue::from_string(raw).unwrap();
            // As serde_json writes it (weir's own writer writes the same bytes), escapes
            // and all: producers in other languages may write any string.
            let buf = serde_json::to_vec(&EnvelopeOut {
                attempt, max_attempts: max, priority, enqueued_at: at, id: &id, kind: &kind,
                trace_id: trace.as_deref(), unique_key: unique.as_deref(), key: key.as_deref(),
                retry: retry.as_deref(), payload: &raw, compact: false,
            })
            .unwrap();
            // And the same job in the compact form: the four numbers left out.
            let text = String::from_utf8(buf.clone()).unwrap();
            let compact = format!("{{{}", &text[text.find(r#","id":"#).unwrap() + 1..]);
            for env in [&buf[..], compact.as_bytes()] {
                let serde = by_serde(env);
                prop_assert!(serde.is_some());
                if let Some(j) = canonical(env) {
                    prop_assert_eq!(Some(fields(&j)), serde);
                } else {
                    // Only strings with escapes may go to serde_json.
                    prop_assert!(env.contains(&b'\\'));
                }
            }
        }

        /// Bytes changed anywhere: read by hand only where serde_json reads the same.
        #[test]
        fn never_reads_what_serde_json_would_read_otherwise(
            cut in 0usize..160, byte in any::<u8>(),
        ) {
            let mut env = br#"{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":17,"id":"j-1","kind":"k","trace_id":"t","payload":{"a":[1,"x"],"b":null}}"#.to_vec();
            let i = cut % env.len();
            env[i] = byte;
            if let Some(j) = canonical(&env) {
                prop_assert_eq!(Some(fields(&j)), by_serde(&env));
            }
            env.insert(i, byte);
            if let Some(j) = canonical(&env) {
                prop_assert_eq!(Some(fields(&j)), by_serde(&env));
            }
        }
    }
}
