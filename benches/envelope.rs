//! The envelope: encode, decode (the payload kept raw), and the handler's typed decode of
//! the payload, `Job::payload::<T>()`, by serde_json and by simd-json at 100 B, 1 KiB,
//! 16 KiB and 256 KiB, for two shapes: `records` (a list of small records: numbers and
//! short strings) and `text` (a few long strings). simd-json parses in place, so its
//! figure includes the copy of the payload into a mutable buffer that `Job::payload`
//! pays. `job_payload` is what `Job::payload` does: the parser
//! `weir::queue::envelope::SIMD_PAYLOAD_MIN_BYTES` picks. Reported per payload and in bytes per
//! second (`cargo bench --bench envelope -- payload`).
// `criterion_main!` defines an undocumented `pub fn main`.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;
use weir::queue::envelope::{Job, decode, payload_serde_json, payload_simd_json};
use weir::{NewJob, Producer};

/// A typed payload of the kind handlers read: scalars, strings and a list of records.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Order {
    user: u64,
    email: String,
    note: String,
    items: Vec<Item>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Item {
    sku: String,
    qty: u32,
    price: f64,
    tags: Vec<String>,
}

/// An order whose JSON is about `bytes` long (records added until it is, the note pads
/// the rest).
fn order_of(bytes: usize) -> Order {
    let mut o = Order {
        user: 1_234_567,
        email: "someone@example.com".into(),
        note: String::new(),
        items: Vec::new(),
    };
    let len = |o: &Order| serde_json::to_vec(o).map_or(0, |v| v.len());
    // Counted as the records are added (serializing the whole order each time took
    // minutes for the largest sizes in a debug build).
    let mut total = len(&o);
    loop {
        let i = o.items.len() as u32;
        let item = Item {
            sku: format!("SKU-{i:06}"),
            qty: i % 7 + 1,
            price: 9.99 + f64::from(i) * 0.25,
            tags: vec!["red".into(), "sale".into()],
        };
        // The record and its comma (the first has none: one byte to spare).
        let item_len = serde_json::to_vec(&item).map_or(0, |v| v.len()) + 1;
        if total + item_len > bytes {
            break;
        }
        total += item_len;
        o.items.push(item);
    }
    o.note = "n".repeat(bytes.saturating_sub(len(&o)));
    o
}

/// The job as a consumer hands it to a handler, carrying `payload`.
fn job_with(payload: &impl Serialize) -> Job {
    let raw = serde_json::value::to_raw_value(payload).expect("serializable");
    let job = NewJob::from_raw("order", raw).id("bench-1");
    let arg = Producer::prepare_offline(job, 1_700_000_000_000, &mut Vec::new()).expect("prepared");
    decode(&arg.id, &arg.envelope, usize::MAX).expect("decodes")
}

fn envelope(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope");
    for size in [100usize, 1_000, 10_000] {
        let payload = serde_json::value::to_raw_value(&order_of(size)).expect("serializable");
        let arg = Producer::prepare_offline(
            NewJob::from_raw("order", payload.clone()).id("bench-1"),
            1,
            &mut Vec::new(),
        )
        .expect("prepared");
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("encode", size), &payload, |b, payload| {
            let mut buf = Vec::new();
            b.iter(|| {
                let job = NewJob::from_raw("order", payload.clone());
                black_box(Producer::prepare_offline(job, 1, &mut buf).expect("prepared"));
            })
        });
        g.bench_with_input(BenchmarkId::new("decode", size), &arg, |b, arg| {
            b.iter(|| black_box(decode(&arg.id, black_box(&arg.envelope), usize::MAX).expect("decodes")))
        });
    }
    g.finish();
}

/// A text-heavy payload: few fields, long strings (a message and its attachments).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Message {
    to: String,
    subject: String,
    body: String,
    attachments: Vec<Attachment>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Attachment {
    name: String,
    data: String,
}

/// A message whose JSON is about `bytes` long: a quarter body, the rest in four
/// attachments of base64-like text.
fn message_of(bytes: usize) -> Message {
    let text = |n: usize, seed: usize| -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ ";
        (0..n)
            .map(|i| ALPHABET[(i * 7 + seed) % ALPHABET.len()] as char)
            .collect()
    };
    let room = bytes.saturating_sub(200);
    Message {
        to: "someone@example.com".into(),
        subject: "Your report".into(),
        body: text(room / 4, 1),
        attachments: (0..4)
            .map(|i| Attachment {
                name: format!("part-{i}.bin"),
                data: text(room * 3 / 16, i),
            })
            .collect(),
    }
}

/// A number-heavy payload: vectors of floats (embeddings, measurements).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Vectors {
    model: String,
    vectors: Vec<Vec<f64>>,
}

/// Vectors of 64 floats whose JSON is about `bytes` long.
fn vectors_of(bytes: usize) -> Vectors {
    let mut v = Vectors {
        model: "embed-small".into(),
        vectors: Vec::new(),
    };
    let mut x = 0.123_456_789_f64;
    let mut row = Vec::new();
    // The rows' JSON so far, read again only when a row is added.
    let mut rows_len = serde_json::to_vec(&v).map_or(0, |j| j.len());
    loop {
        x = (x * 3.987_654_321).fract() - 0.5;
        row.push(x);
        if rows_len + row.len() * 21 > bytes {
            break;
        }
        if row.len() == 64 {
            v.vectors.push(std::mem::take(&mut row));
            rows_len = serde_json::to_vec(&v).map_or(0, |j| j.len());
        }
    }
    if !row.is_empty() {
        v.vectors.push(row);
    }
    v
}

/// The three decoders of one payload: serde_json, simd-json (with its copy), and
/// `Job::payload` (the one the threshold picks).
fn bench_payload<T>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    shape: &str,
    value: &T,
) where
    T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let job = job_with(value);
    let json = job.payload_json().to_owned();
    assert_eq!(&payload_simd_json::<T>(&json).expect("simd-json decodes"), value);
    let size = json.len();
    g.throughput(Throughput::Bytes(size as u64));
    g.bench_with_input(
        BenchmarkId::new(format!("{shape}/serde_json"), size),
        &json,
        |b, json| b.iter(|| black_box(payload_serde_json::<T>(black_box(json)).expect("decodes"))),
    );
    g.bench_with_input(
        BenchmarkId::new(format!("{shape}/simd_json"), size),
        &json,
        |b, json| b.iter(|| black_box(payload_simd_json::<T>(black_box(json)).expect("decodes"))),
    );
    g.bench_with_input(
        BenchmarkId::new(format!("{shape}/job_payload"), size),
        &job,
        |b, job| b.iter(|| black_box(black_box(job).payload::<T>().expect("decodes"))),
    );
}

const SIZES: [usize; 4] = [100, 1 << 10, 16 << 10, 256 << 10];

fn payload(c: &mut Criterion) {
    let mut g = c.benchmark_group("payload");
    for size in SIZES {
        bench_payload(&mut g, "records", &order_of(size));
        bench_payload(&mut g, "text", &message_of(size));
        bench_payload(&mut g, "numbers", &vectors_of(size));
    }
    g.finish();
}

/// Seconds per call of `f`, timed over a batch of about a millisecond.
fn per_call(f: &dyn Fn(), n: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_secs_f64() / f64::from(n)
}

/// serde_json's time over each simd-json variant's, measured in alternating batches (a
/// shared machine's load moves between criterion's sequential runs; side by side it
/// cancels): the median of 31 pairs. Above 1: simd-json is faster.
fn paired_speedups<T: Serialize + serde::de::DeserializeOwned>(value: &T) -> (usize, f64, f64) {
    let json = serde_json::to_string(value).expect("serializable");
    let serde = || {
        drop(black_box(
            payload_serde_json::<T>(black_box(&json)).expect("decodes"),
        ))
    };
    let kept = || {
        drop(black_box(
            payload_simd_json::<T>(black_box(&json)).expect("decodes"),
        ))
    };
    let fresh = || {
        let mut buf = json.as_bytes().to_vec();
        drop(black_box(
            simd_json::serde::from_slice::<T>(&mut buf).expect("decodes"),
        ));
    };
    let n = ((1e-3 / per_call(&serde, 3)).ceil() as u32).max(1);
    let (mut kept_x, mut fresh_x) = (Vec::new(), Vec::new());
    for i in 0..31 {
        let order: [&dyn Fn(); 3] = if i % 2 == 0 {
            [&serde, &kept, &fresh]
        } else {
            [&fresh, &kept, &serde]
        };
        let t: Vec<f64> = order.iter().map(|f| per_call(*f, n)).collect();
        let (s, k, f) = if i % 2 == 0 {
            (t[0], t[1], t[2])
        } else {
            (t[2], t[1], t[0])
        };
        kept_x.push(s / k);
        fresh_x.push(s / f);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (json.len(), median(kept_x), median(fresh_x))
}

/// Prints the paired speedups (skipped in criterion's test mode, as `cargo bench -- --test`
/// and `cargo test --bench envelope` run it, and when a filter names another group).
fn paired(_: &mut Criterion) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filtered_out = args
        .iter()
        .any(|a| !a.starts_with('-') && !"payload_paired".contains(a.as_str()));
    // Criterion's own rule: without `--bench` (which `cargo bench` passes), or with
    // `--test`, each benchmark runs once, as a test.
    let test_mode = !args.iter().any(|a| a == "--bench") || args.iter().any(|a| a == "--test");
    if test_mode || args.iter().any(|a| a == "--list") || filtered_out {
        return;
    }
    println!(
        "payload_paired: serde_json time / simd-json time (above 1: simd-json faster), median of 31 alternating pairs"
    );
    for size in SIZES {
        for (shape, (bytes, kept, fresh)) in [
            ("records", paired_speedups(&order_of(size))),
            ("text", paired_speedups(&message_of(size))),
            ("numbers", paired_speedups(&vectors_of(size))),
        ] {
            println!("payload_paired/{shape}/{bytes}: buffers kept {kept:.2}x, fresh buffers {fresh:.2}x");
        }
    }
}

criterion_group!(benches, envelope, payload, paired);
criterion_main!(benches);
