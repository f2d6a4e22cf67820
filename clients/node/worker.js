'use strict';
// A worker for weir's exec handler: weir runs this program (`weir work --queue emails
// --handler exec:'node app.js'`), writes batches of jobs to its stdin and reads one outcome
// per job from its stdout (docs/protocol.md, "exec handler protocol, version 1"). No
// dependency beyond Node itself.
//
//   const { Worker, Retry, Fatal, Backpressure } = require('weir-producer');
//   const worker = new Worker({ queue: 'emails', concurrency: 64 });
//   worker.handle('send_email', async (job) => { ... }); // job.id, kind, payload, attempt, key
//   worker.run();
//
// Resolving acks the job; throwing retries it with the queue's backoff; `Retry` (with
// `after` in ms) retries after a delay, `Fatal` dead-letters it, `Backpressure` defers it
// without charging an attempt. stdout carries the protocol: console.log goes to stderr
// while the worker runs (weir logs stderr). The worker exits when weir closes stdin.

const readline = require('readline');

const EXEC_PROTOCOL = 1;

/** Retry the job, after `after` ms if given (else the queue's backoff). */
class Retry extends Error {
  constructor(message = 'retry', { after } = {}) {
    super(message);
    this.name = 'Retry';
    this.after = after;
  }
}

/** No retry will cure it: the job is dead-lettered with this reason. */
class Fatal extends Error {
  constructor(message = 'fatal') {
    super(message);
    this.name = 'Fatal';
  }
}

/** The downstream is overloaded: defer the job uncharged, after `after` ms. */
class Backpressure extends Error {
  constructor(message = 'backpressure', { after } = {}) {
    super(message);
    this.name = 'Backpressure';
    this.after = after;
  }
}

/** The ok outcome, with `value` as its result when the job keeps one (weir sends
 * `keep_result` then: its queue keeps completed jobs). What JSON cannot encode is kept by
 * its String(). */
function ok(i, job, value) {
  const o = { i, status: 'ok' };
  if (job.keep_result && value !== undefined && value !== null) {
    try {
      o.result = JSON.parse(JSON.stringify(value) ?? 'null') ?? String(value);
    } catch (e) {
      o.result = String(value);
    }
  }
  return o;
}

function outcome(i, err) {
  if (err === undefined) return { i, status: 'ok' };
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof Fatal) return { i, status: 'fail', error: message };
  const o = { i, status: err instanceof Backpressure ? 'defer' : 'retry' };
  o.error = err instanceof Retry || err instanceof Backpressure ? message : `${(err && err.name) || 'Error'}: ${message}`.slice(0, 2000);
  if ((err instanceof Retry || err instanceof Backpressure) && err.after != null) {
    o.after_ms = Math.max(0, Math.round(err.after));
  }
  return o;
}

class Worker {
  /** @param {{queue?: string, concurrency?: number}} options */
  constructor({ queue, concurrency = 16 } = {}) {
    if (!(concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
    this.queue = queue;
    this.concurrency = concurrency;
    this.handlers = new Map();
    this.running = 0;
    this.waiting = [];
  }

  /** Handles jobs of `kind` with `fn(job)` (async or not). */
  handle(kind, fn) {
    if (typeof fn !== 'function') throw new TypeError('handle(kind, fn): fn must be a function');
    this.handlers.set(kind, fn);
    return this;
  }

  /** Speaks the protocol on stdin/stdout; resolves when weir closes stdin and every job is done. */
  run({ input = process.stdin, output = process.stdout } = {}) {
    const write = (frame) => output.write(JSON.stringify(frame) + '\n');
    if (output === process.stdout) {
      // A stray console.log must not break the protocol.
      console.log = console.info = console.error;
    }
    const pending = new Set();
    let hello = false;
    const lines = readline.createInterface({ input, crlfDelay: Infinity });
    return new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        if (!line.trim()) return;
        let frame;
        try {
          frame = JSON.parse(line);
        } catch (e) {
          reject(new Error(`weir sent a line that is not JSON: ${line.slice(0, 200)}`));
          return;
        }
        if (!hello) {
          hello = true;
          write({ type: 'hello', protocol: EXEC_PROTOCOL, worker: `weir-node/${require('./package.json').version} node/${process.version}`, queue: this.queue, concurrency: this.concurrency });
          return;
        }
        if (frame.type !== 'batch') return;
        const p = Promise.all(frame.jobs.map((job, i) => this._one(i, job))).then((outcomes) =>
          write({ type: 'outcomes', batch: frame.batch, outcomes }),
        );
        pending.add(p);
        p.finally(() => pending.delete(p));
      });
      lines.on('close', () => Promise.all(pending).then(() => resolve(), reject));
    });
  }

  async _one(i, job) {
    if (this.running >= this.concurrency) {
      await new Promise((r) => this.waiting.push(r));
    }
    this.running += 1;
    try {
      const fn = this.handlers.get(job.kind);
      if (!fn) throw new Backpressure(`no handler for kind ${JSON.stringify(job.kind)} in this worker`, { after: 10000 });
      return ok(i, job, await fn(job));
    } catch (e) {
      return outcome(i, e === undefined ? new Error('undefined thrown') : e);
    } finally {
      this.running -= 1;
      const next = this.waiting.shift();
      if (next) next();
    }
  }
}

module.exports = { Worker, Retry, Fatal, Backpressure, EXEC_PROTOCOL };
