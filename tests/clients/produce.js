// Enqueues jobs through the weir-producer package, for tests/clients.rs.
//
// usage: node produce.js REDIS_URL QUEUE all N
//   N jobs through every call of the package (enqueue, enqueueIn, enqueueAt, enqueueBulk;
//   priorities, chosen ids, raw JSON); prints `id<TAB>payload` per job ('*' for ids the
//   package generated in bulk: the test matches those by payload, every payload differs)
'use strict';

const path = require('path');
const { Producer } = require(path.join(__dirname, '..', '..', 'clients', 'node'));
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

async function main() {
  const [url, queue, mode, nText] = process.argv.slice(2);
  if (mode !== 'all') throw new Error(`unknown mode ${mode}`);
  const n = Number(nText);
  const redis = new Redis(url);
  const p = new Producer(redis, queue);
  const out = [];
  const bulk = [];
  for (let i = 0; i < n; i += 1) {
    const priority = PRIORITIES[i % 3];
    if (i % 10 === 0) {
      out.push([await p.enqueue('js', payload(i), { id: `js-${i}`, priority }), JSON.stringify(payload(i))]);
    } else if (i % 10 === 1) {
      out.push([await p.enqueueIn(200, 'js', payload(i), { priority }), JSON.stringify(payload(i))]);
    } else if (i % 10 === 2) {
      const raw = `{ "raw" : [${i}, 1.50, "kept as written"] }`;
      out.push([await p.enqueueAt(new Date(Date.now() + 300), 'js', undefined, { payloadJson: raw, priority }), raw]);
    } else {
      bulk.push({ kind: 'js', payload: payload(i), priority, id: i % 2 === 0 ? `jsb-${i}` : undefined });
    }
  }
  const report = await p.enqueueBulk(bulk);
  if (report.enqueued !== bulk.length || report.duplicates.length) throw new Error(JSON.stringify(report));
  const lines = out.map(([id, text]) => {
    if (!id) throw new Error('a single enqueue was skipped');
    return `${id}\t${text}`;
  });
  for (const job of bulk) lines.push(`${job.id || '*'}\t${JSON.stringify(job.payload)}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  await redis.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
