//! Writing an envelope as the producer stores it: [`tokens`], by hand, the bytes
//! serde_json would write. Every string field of a prepared job (id, kind, keys, trace
//! id) is a token (`validate_token`), which needs no escape.

use super::EnvelopeOut;

/// Writes `env` into `buf` as serde_json writes it, given that none of its strings needs
/// an escape (every one is a token that `validate_token` accepted).
pub(super) fn tokens(env: &EnvelopeOut<'_>, buf: &mut Vec<u8>) {
    debug_assert!(
        [
            Some(env.id),
            Some(env.kind),
            env.trace_id,
            env.unique_key,
            env.key
        ]
        .into_iter()
        .flatten()
        .all(|s| !needs_escape(s)),
        "a string of the envelope of {:?} needs an escape",
        env.id
    );
    let payload = env.payload.get();
    // Every byte below: the numbers take at most 40, names and quotes at most 120.
    let strings_len = [env.trace_id, env.unique_key, env.key]
        .into_iter()
        .flatten()
        .map(str::len)
        .sum::<usize>()
        + env.id.len()
        + env.kind.len();
    buf.reserve(160 + strings_len + payload.len());
    let mut n = itoa::Buffer::new();
    buf.extend_from_slice(br#"{"attempt":"#);
    buf.extend_from_slice(n.format(env.attempt).as_bytes());
    buf.extend_from_slice(br#","max_attempts":"#);
    buf.extend_from_slice(n.format(env.max_attempts).as_bytes());
    buf.extend_from_slice(br#","priority":"#);
    buf.extend_from_slice(n.format(env.priority).as_bytes());
    buf.extend_from_slice(br#","enqueued_at":"#);
    buf.extend_from_slice(n.format(env.enqueued_at).as_bytes());
    field(buf, "id", env.id);
    field(buf, "kind", env.kind);
    if let Some(t) = env.trace_id {
        field(buf, "trace_id", t);
    }
    if let Some(u) = env.unique_key {
        field(buf, "unique_key", u);
    }
    if let Some(k) = env.key {
        field(buf, "key", k);
    }
    buf.extend_from_slice(br#","payload":"#);
    buf.extend_from_slice(payload.as_bytes());
    buf.push(b'}');
}

/// `,"name":"value"` (neither needs an escape).
fn field(buf: &mut Vec<u8>, name: &str, value: &str) {
    buf.extend_from_slice(b",\"");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\":\"");
    buf.extend_from_slice(value.as_bytes());
    buf.push(b'"');
}

/// Whether serde_json would write `s` with an escape: a quote, a backslash or a control
/// character (it writes every other character as it is, UTF-8 included).
fn needs_escape(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
}

#[cfg(test)]
mod tests {
    use crate::queue::envelope::EnvelopeOut;
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    /// What `validate_token` accepts (up to 20 characters here).
    const TOKEN: &str = "[A-Za-z0-9_.:-]{1,20}";

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

        /// The bytes serde_json writes, for any numbers, token strings and payload.
        #[test]
        fn writes_what_serde_json_writes(
            attempt in any::<u32>(), max in any::<u32>(), priority in any::<u8>(), at in any::<u64>(),
            id in TOKEN, kind in TOKEN,
            trace in proptest::option::of(TOKEN),
            unique in proptest::option::of(TOKEN),
            key in proptest::option::of(TOKEN),
            payload in any::<String>(),
        ) {
            let raw = serde_json::to_string(&serde_json::json!({ "s": payload, "n": at })).unwrap();
            let raw = RawValue::from_string(raw).unwrap();
            let env = EnvelopeOut {
                attempt, max_attempts: max, priority, enqueued_at: at, id: &id, kind: &kind,
                trace_id: trace.as_deref(), unique_key: unique.as_deref(), key: key.as_deref(),
                payload: &raw,
            };
            let mut buf = Vec::new();
            env.encode_tokens_into(&mut buf);
            prop_assert_eq!(String::from_utf8(buf).unwrap(), serde_json::to_string(&env).unwrap());
        }
    }
}
