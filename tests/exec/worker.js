// The exec tests' worker on clients/node's Worker: behaves as tests/exec/worker.py.
'use strict';
const fs = require('fs');
const path = require('path');
const { Worker, Retry, Fatal, Backpressure } = require('../../clients/node');

const DIR = process.env.WEIR_TEST_DIR;
fs.writeFileSync(path.join(DIR, `pid-${process.pid}`), '');
const worker = new Worker({ queue: 'tests', concurrency: Number(process.env.WEIR_TEST_CONCURRENCY || 16) });
const mark = (name) => fs.writeFileSync(path.join(DIR, name), '');

function firstTime(job) {
  try {
    fs.writeFileSync(path.join(DIR, `seen-${job.id}`), '', { flag: 'wx' });
    return true;
  } catch (e) {
    return false;
  }
}

worker.handle('t', async (job) => {
  const { mode, sleep_ms: sleepMs } = job.payload;
  if (sleepMs) {
    mark(`started-${job.id}`);
    await new Promise((r) => setTimeout(r, sleepMs));
  }
  if (mode === 'retry_once' && job.attempt === 0) throw new Retry('asked to retry', { after: 50 });
  if (mode === 'raise_once' && job.attempt === 0) throw new Error('boom');
  if (mode === 'defer_once' && firstTime(job)) throw new Backpressure('busy', { after: 50 });
  if (mode === 'fatal') throw new Fatal(`bad row ${job.id}`);
  mark(`done-${job.id}`);
  return { id: job.id, attempt: job.attempt };
});

worker.handle('sync', (job) => {
  mark(`done-${job.id}`);
  return ['sync', job.id];
});

worker.run().then(() => process.stderr.write('worker exiting\n'));
