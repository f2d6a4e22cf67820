//! The client's CPU per job in a bulk enqueue, without a Redis: a chunk of 1,000 jobs
//! prepared (`NewJob` to envelope, as `weir enqueue` and `Producer::enqueue_bulk` do),
//! built into the bulk path's transaction and packed into the bytes that go on the wire;
//! the same chunk as a `Producer::bulk` load writes it (each envelope into a reused
//! buffer, then copied once into the transaction);
//! beside it the same for a raw RPUSH of items of the job's id and payload (what
//! `weir-loadtest drain --compare-bare` pushes). The ratio of the two is the client's
//! share of the enqueue ratio that harness reports. Reported as jobs per second.
// `criterion_main!` defines an undocumented `pub fn main`.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::value::RawValue;
use std::hint::black_box;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts;
use weir::{NewJob, Producer};

/// The allocator of the `weir` and `weir-loadtest` binaries, whose figures these explain.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHUNK: usize = weir::queue::producer::BULK_CHUNK;

/// A JSON payload of `bytes` bytes.
fn payload(bytes: usize) -> Box<RawValue> {
    let fill = "x".repeat(bytes.saturating_sub(8));
    RawValue::from_string(format!(r#"{{"p":"{fill}"}}"#)).unwrap()
}

/// One chunk through weir's bulk path: prepared, built, packed; returns the packed bytes.
fn weir_chunk(keys: &QueueKeys, payload: &RawValue, buf: &mut Vec<u8>) -> usize {
    let jobs: Vec<_> = (0..CHUNK)
        .map(|_| {
            let job = NewJob::from_raw("bench", payload.to_owned());
            Producer::prepare_offline(job, 1_796_000_000_000, buf).unwrap()
        })
        .collect();
    scripts::plain_pipeline(keys, &jobs, false)
        .get_packed_pipeline()
        .len()
}

/// One chunk through a [`weir::Bulk`] load: envelopes written into the transaction (no
/// job built per payload), then packed; returns the packed bytes.
fn bulk_chunk(keys: &QueueKeys, payload: &RawValue) -> usize {
    let payloads = std::iter::repeat_n(payload, CHUNK);
    weir::queue::producer::bulk_pipelines(keys, "bench", payloads, 1_796_000_000_000)
        .unwrap()
        .iter()
        .map(|p| p.get_packed_pipeline().len())
        .sum()
}

/// One chunk of raw RPUSH: items `{"id":…,"payload":…}` built and packed.
fn rpush_chunk(from: u64, payload: &RawValue) -> usize {
    let mut push = redis::cmd("RPUSH");
    push.arg("bare:{bench}:ready");
    for i in from..from + CHUNK as u64 {
        let mut item = Vec::with_capacity(payload.get().len() + 40);
        item.extend_from_slice(br#"{"id":"b-"#);
        item.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
        item.extend_from_slice(br#"","payload":"#);
        item.extend_from_slice(payload.get().as_bytes());
        item.push(b'}');
        push.arg(item);
    }
    push.get_packed_command().len()
}

fn bulk(c: &mut Criterion) {
    let keys = QueueKeys::new("bench").unwrap();
    let mut g = c.benchmark_group("bulk_enqueue_client");
    g.throughput(Throughput::Elements(CHUNK as u64));
    for bytes in [100, 1024] {
        let p = payload(bytes);
        let mut buf = Vec::new();
        g.bench_with_input(BenchmarkId::new("weir", bytes), &p, |b, p| {
            b.iter(|| black_box(weir_chunk(&keys, p, &mut buf)))
        });
        g.bench_with_input(BenchmarkId::new("weir_bulk", bytes), &p, |b, p| {
            b.iter(|| black_box(bulk_chunk(&keys, p)))
        });
        let mut from = 0;
        g.bench_with_input(BenchmarkId::new("raw_rpush", bytes), &p, |b, p| {
            b.iter(|| {
                from += CHUNK as u64;
                black_box(rpush_chunk(from, p))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bulk);
criterion_main!(benches);
