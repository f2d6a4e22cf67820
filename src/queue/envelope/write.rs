//! Writing an envelope as the producer stores it: [`tokens`], by hand, the bytes
//! serde_json would write. Every string field of a prepared job (id, kind, keys, trace
//! id) is a token (`validate_token`), which needs no escape.

use super::EnvelopeOut;

/// Writes `env` into `buf` as serde_json writes it, given that none of its strings needs
/// an escape (every one is a token that `validate_token` accepted).
pub(super) fn tokens(env: &EnvelopeOut<'_>, buf: &mut Vec<u8>) {
    let payload = env.payload.get();
    // Every byte below: the numbers take at most 40, names and quotes at most 120.
    buf.reserve(160 + strings_len(env) + payload.len());
    head(env, buf);
    buf.extend_from_slice(payload.as_bytes());
    buf.push(b'}');
}

/// The bytes of the strings of `env` but its payload.
fn strings_len(env: &EnvelopeOut<'_>) -> usize {
    [env.trace_id, env.unique_key, env.key, env.retry]
        .into_iter()
        .flatten()
        .map(str::len)
        .sum::<usize>()
        + env.id.len()
        + env.kind.len()
}

/// Writes what comes before the payload in `env`'s envelope, through `,"payload":`, as
/// serde_json writes it (every string a token), or in the compact form where
/// [`EnvelopeOut::is_compact`]; `env.payload` is not read. The payload
/// and a closing `}` complete the envelope.
pub(crate) fn head(env: &EnvelopeOut<'_>, buf: &mut Vec<u8>) {
    debug_assert!(
        [
            Some(env.id),
            Some(env.kind),
            env.trace_id,
            env.unique_key,
            env.key,
            env.retry
        ]
        .into_iter()
        .flatten()
        .all(|s| !needs_escape(s)),
        "a string of the envelope of {:?} needs an escape",
        env.id
    );
    if env.is_compact() {
        buf.extend_from_slice(br#"{"id":""#);
    } else {
        NUMBERS.with_borrow_mut(|numbers| numbers.write(env, buf));
        // The two fields every envelope has, their names and quotes as whole literals.
        buf.extend_from_slice(br#","id":""#);
    }
    buf.extend_from_slice(env.id.as_bytes());
    buf.extend_from_slice(br#"","kind":""#);
    buf.extend_from_slice(env.kind.as_bytes());
    buf.push(b'"');
    if let Some(t) = env.trace_id {
        field(buf, "trace_id", t);
    }
    if let Some(u) = env.unique_key {
        field(buf, "unique_key", u);
    }
    if let Some(k) = env.key {
        field(buf, "key", k);
    }
    if let Some(r) = env.retry {
        field(buf, "retry", r);
    }
    buf.extend_from_slice(br#","payload":"#);
}

thread_local! {
    /// The numbers that open the envelopes this thread writes, as last written.
    static NUMBERS: std::cell::RefCell<Numbers> = const {
        std::cell::RefCell::new(Numbers { of: None, text: Vec::new() })
    };
}

/// `{"attempt":…,"max_attempts":…,"priority":…,"enqueued_at":…` for one set of values. The
/// jobs of a bulk load share all four (a fresh job, the call's clock, the load's options),
/// so the text is formatted once per load rather than four numbers per job (a tenth of
/// the client's instructions per job in a bulk enqueue).
struct Numbers {
    /// attempt, max_attempts, priority, enqueued_at.
    of: Option<(u32, u32, u8, u64)>,
    text: Vec<u8>,
}

impl Numbers {
    fn write(&mut self, env: &EnvelopeOut<'_>, buf: &mut Vec<u8>) {
        let of = (env.attempt, env.max_attempts, env.priority, env.enqueued_at);
        if self.of != Some(of) {
            let (t, mut n) = (&mut self.text, itoa::Buffer::new());
            t.clear();
            t.extend_from_slice(br#"{"attempt":"#);
            t.extend_from_slice(n.format(env.attempt).as_bytes());
            t.extend_from_slice(br#","max_attempts":"#);
            t.extend_from_slice(n.format(env.max_attempts).as_bytes());
            t.extend_from_slice(br#","priority":"#);
            t.extend_from_slice(n.format(env.priority).as_bytes());
            t.extend_from_slice(br#","enqueued_at":"#);
            t.extend_from_slice(n.format(env.enqueued_at).as_bytes());
            self.of = Some(of);
        }
        buf.extend_from_slice(&self.text);
    }
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
            retry in proptest::option::of("(fixed|exp|sidekiq):[a-z0-9=.,]{0,30}"),
            payload in any::<String>(),
        ) {
            let raw = serde_json::to_string(&serde_json::json!({ "s": payload, "n": at })).unwrap();
            let raw = RawValue::from_string(raw).unwrap();
            let env = EnvelopeOut {
                attempt, max_attempts: max, priority, enqueued_at: at, id: &id, kind: &kind,
                trace_id: trace.as_deref(), unique_key: unique.as_deref(), key: key.as_deref(),
                retry: retry.as_deref(), payload: &raw, compact: false,
            };
            let mut buf = Vec::new();
            env.encode_tokens_into(&mut buf);
            prop_assert_eq!(String::from_utf8(buf).unwrap(), serde_json::to_string(&env).unwrap());
        }
    }

    /// The numbers' text is kept between envelopes: jobs that share them, then jobs that
    /// differ from the last in each one, each written as serde_json writes it.
    #[test]
    fn numbers_kept_between_envelopes_follow_every_change() {
        let raw = RawValue::from_string(r#"{"n":1}"#.into()).unwrap();
        let base = EnvelopeOut {
            attempt: 0,
            max_attempts: 5,
            priority: 1,
            enqueued_at: 1_796_000_000_000,
            id: "a",
            kind: "k",
            trace_id: None,
            unique_key: None,
            key: None,
            retry: None,
            payload: &raw,
            compact: false,
        };
        let envs = [
            base,
            EnvelopeOut { id: "b", ..base },
            EnvelopeOut { attempt: 3, ..base },
            EnvelopeOut {
                max_attempts: 25,
                ..base
            },
            EnvelopeOut { priority: 0, ..base },
            EnvelopeOut {
                enqueued_at: 1_796_000_000_001,
                ..base
            },
            EnvelopeOut {
                key: Some("tenant-1"),
                ..base
            },
            base,
        ];
        let mut buf = Vec::new();
        for env in &envs {
            env.encode_tokens_into(&mut buf);
            assert_eq!(
                std::str::from_utf8(&buf).unwrap(),
                serde_json::to_string(env).unwrap()
            );
        }
    }
}
