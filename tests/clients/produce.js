// Enqueues jobs through the weir-producer package, for tests/clients.rs.
//
// usage: node produce.js REDIS_URL QUEUE all|badkey N
//   all: N jobs through every call of the package (enqueue, enqueueIn, enqueueAt, enqueueBulk;
//   priorities, chosen ids, job keys, raw JSON); prints `id<TAB>key<TAB>payload` per job
//   (key empty for a job without one; '*' for ids the package generated in bulk: the test
//   matches those by payload, every payload differs)
//   badkey: bad job keys through enqueue and enqueueBulk (N unused); prints each refusal
//   badretry: bad retry rules the same way
'use strict';

const path = require('path');
const { Producer, WeirError } = require(path.join(__dirname, '..', '..', 'clients', 'node'));
const Redis = require(require.resolve('ioredis', { paths: [path.join(__dirname, '..', '..', 'clients', 'node')] }));

const PRIORITIES = ['high', 'normal', 'low'];

function payload(i) {
  const shapes = [
    { i, s: 'h\u00e9llo \u2713 "quoted" \\ back\tslash\n', emoji: '\u{1F600}' },
    [i, 0.1 * i, -1e-300, true, null, 2 ** 53 + i],
    { nested: { deeper: [{ i }, [], {}] }, empty: '' },
    `just a string ${i} \u2028 separator`,
    i * 7919,
  ];
  return shapes[i % shapes.length];
}

// A job key for three jobs in seven, through every call (none for the rest).
function key(i) {
  return i % 7 < 3 ? `js-tenant.${i % 5}:eu` : undefined;
}

// A retry rule for one job in four, each in the form weir writes it (none for the rest).
const RETRY = [undefined, 'fixed:1m,10m,attempts=3', 'sidekiq:attempts=26', 'exp:base=5s,factor=3,cap=6h,jitter=0.3,attempts=12'];

const BAD_RETRY = ['never', 'fixed:', 'fixed:soon', 'exp:factor=1000', 'exp:jitter=2', 'sidekiq:attempts=0', 'exp:"x"', 7];

async function badKeys(p, option, bads) {
  for (const bad of bads) {
    const calls = [() => p.enqueue('k', 1, { [option]: bad }), () => p.enqueueBulk([{ kind: 'k', payload: 1 }, { kind: 'k', payload: 2, [option]: bad }])];
    for (const call of calls) {
      try {
        await call();
      } catch (e) {
        if (!(e instanceof WeirError)) throw e;
        process.stdout.write(`${e.message}\n`);
        continue;
      }
      throw new Error(`${option} ${JSON.stringify(bad)} accepted`);
    }
  }
}

async function main() {
  const [url, queue, mode, nText] = process.argv.slice(2);
  const n = Number(nText);
  const redis = new Redis(url);
  // WEIR_COMPACT set: compact envelopes for the jobs they describe
  const p = new Producer(redis, queue, { compactEnvelopes: Boolean(process.env.WEIR_COMPACT) });
  if (mode === 'badkey' || mode === 'badretry') {
    if (mode === 'badkey') await badKeys(p, 'key', ['a b', '', 'k'.repeat(129), 'a"b', 'tenant/1', 7]);
    else await badKeys(p, 'retry', BAD_RETRY);
    await redis.quit();
    return;
  }
  if (mode === 'attempts') {
    // each maxAttempts value through enqueue and enqueueBulk; prints `id<TAB>value`
    const values = [0, 1, 3, undefined];
    const name = (v) => (v === undefined ? 'None' : String(v));
    for (const v of values) await p.enqueue('att', v ?? null, { id: `att-${name(v)}`, maxAttempts: v });
    await p.enqueueBulk(values.map((v) => ({ kind: 'att', payload: v ?? null, id: `attb-${name(v)}`, maxAttempts: v })));
    for (const v of values) process.stdout.write(`att-${name(v)}\t${name(v)}\nattb-${name(v)}\t${name(v)}\n`);
    await redis.quit();
    return;
  }
  if (mode !== 'all') throw new Error(`unknown mode ${mode}`);
  const out = [];
  const bulk = [];
  for (let i = 0; i < n; i += 1) {
    const priority = PRIORITIES[i % 3];
    const k = key(i);
    const retry = RETRY[i % 4];
    if (i % 10 === 0) {
      out.push([await p.enqueue('js', payload(i), { id: `js-${i}`, priority, key: k, retry }), k, JSON.stringify(payload(i))]);
    } else if (i % 10 === 1) {
      out.push([await p.enqueueIn(200, 'js', payload(i), { priority, key: k, retry }), k, JSON.stringify(payload(i))]);
    } else if (i % 10 === 2) {
      const raw = `{ "raw" : [${i}, 1.50, "kept as written"] }`;
      out.push([await p.enqueueAt(new Date(Date.now() + 300), 'js', undefined, { payloadJson: raw, priority, key: k, retry }), k, raw]);
    } else {
      bulk.push({ kind: 'js', payload: payload(i), priority, id: i % 2 === 0 ? `jsb-${i}` : undefined, key: k, retry });
    }
  }
  const report = await p.enqueueBulk(bulk);
  if (report.enqueued !== bulk.length || report.duplicates.length) throw new Error(JSON.stringify(report));
  const lines = out.map(([id, k, text]) => {
    if (!id) throw new Error('a single enqueue was skipped');
    return `${id}\t${k || ''}\t${text}`;
  });
  for (const job of bulk) lines.push(`${job.id || '*'}\t${job.key || ''}\t${JSON.stringify(job.payload)}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  await redis.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
