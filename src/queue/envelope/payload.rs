//! [`Job::payload`](super::Job::payload)'s decoders: serde_json, or with the `simd`
//! feature simd-json for the payloads where it wins (large and number-heavy, see
//! [`SIMD_PAYLOAD_MIN_BYTES`]). Both give the same values and the same errors.

#[cfg(feature = "simd")]
use super::DEFAULT_MAX_ENVELOPE_BYTES;

/// With the `simd` feature, [`Job::payload`](super::Job::payload) decodes a payload with
/// simd-json when it has at least this many bytes and at least [`SIMD_MIN_DIGIT_PCT`]%
/// digits in its first [`SIMD_SNIFF_BYTES`]; serde_json decodes every other payload (and,
/// without the feature, all of them). Measured by `cargo bench --bench envelope -- payload` (typed
/// decode into a struct, simd-json's copy of the payload included, 100 B to 256 KiB):
/// simd-json is 1.4-1.5x faster on number-heavy payloads from 1 KiB up (vectors of
/// floats; slower at 100 B), level with serde_json on lists of small records from 16 KiB
/// up (slower below), and 0.6-0.7x on text-heavy payloads at every size. So size alone
/// does not pick the winner; the share of digits does.
pub const SIMD_PAYLOAD_MIN_BYTES: usize = 1024;
/// See [`SIMD_PAYLOAD_MIN_BYTES`]: the share of ASCII digits (in percent) a payload's
/// first [`SIMD_SNIFF_BYTES`] need for simd-json (number-heavy JSON is mostly digits;
/// records and text are a fifth or less).
pub const SIMD_MIN_DIGIT_PCT: usize = 50;
/// See [`SIMD_PAYLOAD_MIN_BYTES`]: how much of a payload the digit count looks at.
pub const SIMD_SNIFF_BYTES: usize = 1024;

/// Whether [`Job::payload`](super::Job::payload) decodes `json` with simd-json (see [`SIMD_PAYLOAD_MIN_BYTES`]).
#[doc(hidden)]
pub fn prefers_simd(json: &str) -> bool {
    if json.len() < SIMD_PAYLOAD_MIN_BYTES {
        return false;
    }
    let head = &json.as_bytes()[..json.len().min(SIMD_SNIFF_BYTES)];
    let digits = head.iter().filter(|b| b.is_ascii_digit()).count();
    digits * 100 >= head.len() * SIMD_MIN_DIGIT_PCT
}

/// [`Job::payload`](super::Job::payload)'s decoder for what [`prefers_simd`] leaves (public for the `envelope`
/// benchmark and the tests that hold both decoders to the same results).
#[doc(hidden)]
pub fn payload_serde_json<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(json)
}

/// Largest payload whose simd-json working memory a thread keeps for the next decode
/// (about three times the payload: the mutable copy, the aligned input and the string
/// buffer); larger payloads get memory of their own, freed after the decode.
#[cfg(feature = "simd")]
const SIMD_SCRATCH_MAX_BYTES: usize = DEFAULT_MAX_ENVELOPE_BYTES;

#[cfg(feature = "simd")]
thread_local! {
    /// The mutable copy of the payload simd-json parses in place, and its buffers: kept
    /// per thread, since allocating them for every decode costs more than the parse.
    static SIMD_SCRATCH: std::cell::RefCell<(Vec<u8>, simd_json::Buffers)> =
        std::cell::RefCell::new((Vec::new(), simd_json::Buffers::default()));
}

/// [`Job::payload`](super::Job::payload)'s decoder for what [`prefers_simd`] picks: simd-json on a mutable
/// copy of the payload (it parses in place). Where simd-json refuses a payload the result
/// is serde_json's, so errors (and any payload the two parsers read differently) come out
/// exactly as without the `simd` feature.
#[cfg(feature = "simd")]
#[doc(hidden)]
pub fn payload_simd_json<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
    // The parsers read a negative zero (`-0`, `-0.0`, `-0e1`) differently (one keeps the
    // sign, one drops it): a payload that may hold one goes to serde_json, so both paths
    // give the same values. (A `-0.5` sends its payload there too: rare, and correct.)
    if json.contains("-0") {
        return serde_json::from_str(json);
    }
    let parse = |buf: &mut Vec<u8>, buffers: &mut simd_json::Buffers| {
        buf.clear();
        buf.extend_from_slice(json.as_bytes());
        simd_json::serde::from_slice_with_buffers::<T>(buf, buffers).ok()
    };
    let parsed = if json.len() <= SIMD_SCRATCH_MAX_BYTES {
        // A payload type whose own decoding decodes another payload finds the scratch
        // taken: that inner decode goes to serde_json.
        SIMD_SCRATCH
            .try_with(|s| {
                let mut s = s.try_borrow_mut().ok()?;
                let (buf, buffers) = &mut *s;
                parse(buf, buffers)
            })
            .ok()
            .flatten()
    } else {
        parse(&mut Vec::new(), &mut simd_json::Buffers::new(json.len()))
    };
    match parsed {
        Some(v) => Ok(v),
        None => serde_json::from_str(json),
    }
}

/// Both payload decoders give the same values and the same errors, on the shapes a
/// typed handler reads and on arbitrary JSON, on both sides of the threshold.
#[cfg(all(test, feature = "simd"))]
mod tests {
    use super::*;
    use crate::queue::envelope::decode;
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};
    use serde_json::Value;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Order {
        user: u64,
        delta: i64,
        email: String,
        note: Option<String>,
        items: Vec<Item>,
        kind: Kind,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Item {
        sku: String,
        qty: u32,
        price: f64,
        tags: Vec<String>,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Kind {
        Plain,
        Gift { to: String, wrap: bool },
    }

    fn item() -> impl Strategy<Value = Item> {
        let tags = proptest::collection::vec(any::<String>(), 0..4);
        (
            any::<String>(),
            any::<u32>(),
            any::<f64>().prop_filter("finite", |f| f.is_finite()),
            tags,
        )
            .prop_map(|(sku, qty, price, tags)| Item {
                sku,
                qty,
                price,
                tags,
            })
    }

    fn order() -> impl Strategy<Value = Order> {
        let kind = prop_oneof![
            Just(Kind::Plain),
            (any::<String>(), any::<bool>()).prop_map(|(to, wrap)| Kind::Gift { to, wrap }),
        ];
        // Up to 64 items: payloads from a few dozen bytes to a few KiB.
        let items = proptest::collection::vec(item(), 0..64);
        (
            any::<u64>(),
            any::<i64>(),
            any::<String>(),
            any::<Option<String>>(),
            items,
            kind,
        )
            .prop_map(|(user, delta, email, note, items, kind)| Order {
                user,
                delta,
                email,
                note,
                items,
                kind,
            })
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 400, 12, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::from),
                proptest::collection::btree_map(any::<String>(), inner, 0..12)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Both decoders' results for `T`, errors as their messages.
    fn both<T: serde::de::DeserializeOwned>(json: &str) -> [Result<T, String>; 2] {
        [
            payload_serde_json::<T>(json).map_err(|e| e.to_string()),
            payload_simd_json::<T>(json).map_err(|e| e.to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn typed_payloads_decode_the_same(o in order()) {
            let json = serde_json::to_string(&o).unwrap();
            let [a, b] = both::<Order>(&json);
            prop_assert_eq!(a.as_ref(), Ok(&o));
            prop_assert_eq!(b.as_ref(), Ok(&o));
        }

        #[test]
        fn any_json_decodes_the_same(v in json(), cut in any::<prop::sample::Index>()) {
            let json = serde_json::to_string(&v).unwrap();
            let [a, b] = both::<Value>(&json);
            prop_assert_eq!(a.as_ref(), Ok(&v));
            prop_assert_eq!(b, a);
            // Cut short: both fail, with serde_json's message (or, cut at a value's
            // end, both succeed alike).
            let mut end = cut.index(json.len().max(1));
            while !json.is_char_boundary(end) {
                end -= 1;
            }
            let [a, b] = both::<Value>(&json[..end]);
            prop_assert_eq!(b, a);
            let [a, b] = both::<Order>(&json);
            prop_assert_eq!(b, a);
        }
    }

    #[test]
    fn negative_zero_decodes_the_same() {
        for json in ["-0.0", "[-0.0,1]", "{\"a\":-0,\"b\":-0e3}", "[-0.25]"] {
            let [a, b] = both::<Value>(json);
            assert_eq!(b, a, "{json}");
            let [a, b] = both::<f64>(json.trim_start_matches('[').split(',').next().unwrap());
            assert_eq!(b.map(f64::to_bits), a.map(f64::to_bits), "{json}");
        }
    }

    #[test]
    fn simd_takes_large_number_heavy_payloads() {
        let floats = |n: usize| serde_json::to_string(&vec![1.0f64 / 3.0; n]).unwrap();
        assert!(
            prefers_simd(&floats(100)),
            "{} bytes of floats",
            floats(100).len()
        );
        assert!(!prefers_simd(&floats(20)), "under {SIMD_PAYLOAD_MIN_BYTES} bytes");
        let text = serde_json::to_string(&serde_json::json!({"body": "x1".repeat(2000)})).unwrap();
        assert!(
            !prefers_simd(&text),
            "half digits is not enough here: {}",
            text.len()
        );
    }

    #[test]
    fn job_payload_takes_either_path_with_the_same_result() {
        let records = |n: u32| -> Vec<Value> {
            (0..n)
                .map(|i| serde_json::json!({"sku": format!("s-{i}\u{e9}\\"), "qty": i, "price": f64::from(i) / 3.0}))
                .collect()
        };
        let numbers = |n: u32| -> Vec<Value> { (0..n).map(|i| (f64::from(i) / 7.0).into()).collect() };
        let mut paths = [0, 0];
        for payload in [0, 1, 10, 100, 1_000, 10_000]
            .into_iter()
            .flat_map(|n| [records(n), numbers(n)])
        {
            let payload = serde_json::to_string(&serde_json::json!({"items": payload})).unwrap();
            paths[usize::from(prefers_simd(&payload))] += 1;
            let env = format!(
                r#"{{"attempt":0,"max_attempts":1,"priority":1,"enqueued_at":0,"id":"x","kind":"k","payload":{payload}}}"#
            );
            let job = decode("x", env.as_bytes(), usize::MAX).unwrap();
            let via_job: Value = job.payload().unwrap();
            assert_eq!(via_job, payload_serde_json::<Value>(&payload).unwrap());
            assert_eq!(via_job, payload_simd_json::<Value>(&payload).unwrap());
            let wrong = job.payload::<Vec<u8>>().unwrap_err().to_string();
            assert_eq!(
                wrong,
                payload_serde_json::<Vec<u8>>(&payload).unwrap_err().to_string()
            );
        }
        assert!(paths[0] > 0 && paths[1] > 0, "both paths taken: {paths:?}");
    }
}
