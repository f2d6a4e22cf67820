//! Envelope encode and decode: serde_json (with the payload kept raw) against simd-json,
//! at three payload sizes. Reported as envelopes per second.
// `criterion_main!` defines an undocumented `pub fn main`.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use weir::envelope::{decode, decode_simd};
use weir::{NewJob, Producer};

fn envelope_of(payload_bytes: usize) -> (String, Vec<u8>) {
    // Producer::prepare needs no connection; a lazily-connecting client would do, but the
    // envelope layout is all we need, so encode through the same public path.
    let payload = serde_json::json!({
        "user": 1234567,
        "email": "someone@example.com",
        "data": "x".repeat(payload_bytes.saturating_sub(50)),
    });
    let job = NewJob::new("email", &payload).unwrap().id("bench-1");
    let arg = prepare(job);
    (arg.id, arg.envelope)
}

fn prepare(job: NewJob) -> weir::scripts::EnqueueArg {
    Producer::prepare_offline(job, 1_700_000_000_000, &mut Vec::new()).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope");
    for size in [100usize, 1_000, 10_000] {
        let (id, env) = envelope_of(size);
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("encode", size), &size, |b, &size| {
            let payload = serde_json::json!({ "data": "x".repeat(size) });
            let raw = serde_json::value::to_raw_value(&payload).unwrap();
            let mut buf = Vec::new();
            b.iter(|| {
                let job = NewJob::from_raw("email", raw.clone());
                black_box(Producer::prepare_offline(job, 1, &mut buf).unwrap());
            })
        });
        g.bench_with_input(BenchmarkId::new("decode_serde_json", size), &env, |b, env| {
            b.iter(|| black_box(decode(&id, black_box(env), usize::MAX).unwrap()))
        });
        g.bench_with_input(BenchmarkId::new("decode_simd_json", size), &env, |b, env| {
            b.iter(|| black_box(decode_simd(&id, black_box(env), usize::MAX).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
