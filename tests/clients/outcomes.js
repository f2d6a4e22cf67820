// The enqueue outcomes of the weir-producer package, for tests/clients_outcomes.rs.
//
// usage: node outcomes.js REDIS_URL QUEUE
//   Runs the scenario of tests/clients_outcomes.rs; prints one outcome per line, then
//   `enqueue: <what enqueue resolved to for a duplicate>`, then `error: <name> <instanceof
//   WeirError> <String(err)>` for a refused job kind.
'use strict';

const path = require('path');
const { Producer, WeirError } = require(path.join(__dirname, '..', '..', 'clients', 'node'));
const Redis = require(require.resolve('ioredis', { paths: [path.join(__dirname, '..', '..', 'clients', 'node')] }));

const HOUR = 3600 * 1000;
const SCENARIO = [
  { id: 'o-1' },
  { id: 'o-1' },
  { uniqueKey: 'u-1', uniqueFor: HOUR },
  { uniqueKey: 'u-1', uniqueFor: HOUR },
  { id: 'o-2', uniqueKey: 'u-1', uniqueFor: HOUR },
  { id: 'o-1', uniqueKey: 'u-2', uniqueFor: HOUR },
];

async function main() {
  const [url, queue] = process.argv.slice(2);
  const redis = new Redis(url);
  const p = new Producer(redis, queue);
  for (const opts of SCENARIO) {
    const { outcome } = await p.enqueueOutcome('outcome', { n: 1 }, opts);
    console.log(outcome);
  }
  console.log(`enqueue: ${JSON.stringify(await p.enqueue('outcome', 1, { id: 'o-1' }))}`);
  try {
    await p.enqueue('bad kind', 1);
    console.log('error: none');
  } catch (e) {
    console.log(`error: ${e.name} ${e instanceof WeirError} ${String(e)}`);
  }
  await redis.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
