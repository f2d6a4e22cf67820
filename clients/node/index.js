'use strict';
// Enqueue jobs into weir queues from Node.js: a thin wrapper over `FCALL weir_enqueue`.
// The contract (envelope, keys, arguments) is weir's protocol 1, stated in weir's
// docs/protocol.md. The library must be loaded in Redis (`weir functions load`, or any
// `weir work` consumer at start); the first call checks that it speaks protocol 1.
//
// Redis can lose the library (a restart without persistence, a failover, FUNCTION
// FLUSH); a running weir consumer loads it again within a second. A call that finds it
// missing waits up to LIBRARY_WAIT_MS for that, then throws a WeirError that says what to
// run.

const crypto = require('crypto');

/** The protocol this package speaks (docs/protocol.md). */
const PROTOCOL = 1;
/** Jobs per FCALL in enqueueBulk, and envelope bytes per call. */
const BULK_CHUNK = 1000;
const BULK_CHUNK_BYTES = 1 << 20;
const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_MAX_ENVELOPE_BYTES = 1 << 20;

// The queue's keys, in the order weir_enqueue takes them (weir's src/queue/keys.rs).
const KEY_SUFFIXES = [
  'ready:high', 'ready:normal', 'ready:low',
  'delayed:high', 'delayed:normal', 'delayed:low',
  'jobs', 'lease', 'dead', 'errors', 'paused', 'counters', 'wake',
  'started', 'suspects', 'deferrals', 'lease_tokens', 'settings', 'unique:',
];
// The queue registry (weir's keys.rs QUEUES): weir_enqueue takes it after the queue's keys.
const QUEUES = 'weir:queues';
const PRIORITIES = { high: 0, normal: 1, low: 2 };
const TOKEN = /^[A-Za-z0-9_.:-]{1,128}$/;
/** enqueueOutcome's outcomes. */
const ENQUEUED = 'enqueued';
const DUPLICATE_ID = 'duplicate_id';
const UNIQUE_KEY_HELD = 'unique_key_held';

/** A job weir would refuse, or a Redis without a usable weir library. */
class WeirError extends Error {
  constructor(message, options) {
    super(message, options);
    // So logs and `err.name` checks say which library raised it, not a plain `Error`.
    this.name = 'WeirError';
  }
}

/** How long a call waits for a missing library to be loaded again (a running weir
 * consumer checks every second), and how often it looks meanwhile. */
const LIBRARY_WAIT_MS = 5000;
const LIBRARY_POLL_MS = 100;
const MISSING = 'the weir Functions library is not loaded in this Redis (a restart without '
  + 'persistence, a failover or FUNCTION FLUSH loses it, and no weir consumer loaded it again '
  + `within ${LIBRARY_WAIT_MS / 1000} s): run \`weir functions load\` against this Redis, or start a weir consumer`;

/** Runs `call` (an FCALL); while Redis answers that the function is not found (nothing
 * ran), tries again for up to LIBRARY_WAIT_MS, then throws WeirError. */
async function whenLoaded(call) {
  const deadline = Date.now() + LIBRARY_WAIT_MS;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!String(e.message).includes('Function not found')) throw e;
      if (Date.now() >= deadline) throw new WeirError(MISSING);
    }
    await new Promise((resolve) => setTimeout(resolve, LIBRARY_POLL_MS));
  }
}

function token(what, value) {
  if (typeof value !== 'string' || !TOKEN.test(value)) {
    throw new WeirError(`invalid ${what} ${JSON.stringify(value)}: use 1 to 128 characters from A-Z a-z 0-9 _ . : -`);
  }
  return value;
}

const RETRY_DURATION = /^(?:[0-9]+[a-zµ]+)+$/;

/** Checks a retry rule as weir reads it (`sidekiq`, `exp:base=1s,factor=2,cap=1h,jitter=0.5`,
 * `fixed:10s,1m`, each with an optional `,attempts=N`); returns it without spaces. */
function retryRule(spec) {
  const bad = (why) => new WeirError(`invalid retry rule ${JSON.stringify(spec)}: ${why}`);
  if (typeof spec !== 'string' || spec.length > 1024) throw bad('expected a string of at most 1024 characters');
  const text = spec.trim();
  const colon = text.indexOf(':');
  const name = colon < 0 ? text : text.slice(0, colon);
  const parts = [];
  let attempts = null;
  for (const p of (colon < 0 ? '' : text.slice(colon + 1)).split(',').map((x) => x.trim()).filter(Boolean)) {
    if (p.startsWith('attempts=')) {
      if (!/^[0-9]+$/.test(p.slice(9)) || Number(p.slice(9)) < 1) throw bad('attempts must be a whole number of at least 1');
      attempts = p;
    } else {
      parts.push(p);
    }
  }
  if (name === 'fixed' && parts.length >= 1 && parts.length <= 100) {
    for (const p of parts) if (!RETRY_DURATION.test(p)) throw bad(`${JSON.stringify(p)} is not a duration (10s, 1m, 1h30m)`);
  } else if (name === 'exp') {
    for (const p of parts) {
      const [k, v] = p.split('=', 2);
      const x = Number(v);
      const ok = ((k === 'base' || k === 'cap') && RETRY_DURATION.test(v || ''))
        || (k === 'factor' && v !== '' && x >= 1 && x <= 100)
        || (k === 'jitter' && v !== '' && x >= 0 && x <= 1);
      if (!ok) throw bad(`${JSON.stringify(p)}: expected base=DURATION, cap=DURATION, factor=1..100 or jitter=0..1`);
    }
  } else if (!(name === 'sidekiq' && parts.length === 0)) {
    throw bad('expected sidekiq, exp:base=1s,factor=2,cap=1h,jitter=0.5 or fixed:10s,1m (each may add ,attempts=N)');
  }
  if (attempts) parts.push(attempts);
  return `${name}:${parts.join(',')}`;
}

/** The keys of `queue`, in the order weir_enqueue takes them. */
function queueKeys(queue) {
  token('queue name', queue);
  return KEY_SUFFIXES.map((s) => `weir:{${queue}}:${s}`);
}

function wholeMs(what, ms) {
  if (ms === undefined || ms === null) return 0;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new WeirError(`${what} must be a number of milliseconds >= 0`);
  }
  return Math.floor(ms);
}

function runAtMs(when) {
  if (when === undefined || when === null) return 0;
  const ms = when instanceof Date ? when.getTime() : when;
  return Math.max(1, wholeMs('runAt', ms));
}

const PREFIX = crypto.randomBytes(8).toString('hex');
let next = 0;
function newId() {
  return `${PREFIX}-${(next++).toString(16)}`;
}

/** A time id: the enqueue time as 8 base-36 digits, '.', then a fresh id; null past the
 * digits' range (weir reads the time back from a compact envelope's id). */
function timeId(nowMs) {
  if (!(nowMs >= 0 && nowMs < 36 ** 8)) return null;
  return `${nowMs.toString(36).padStart(8, '0')}.${newId()}`;
}

function payloadJson(job) {
  if (job.payloadJson !== undefined) {
    try {
      JSON.parse(job.payloadJson);
    } catch (e) {
      throw new WeirError(`payloadJson is not JSON: ${e.message}`);
    }
    return job.payloadJson;
  }
  const text = JSON.stringify(job.payload === undefined ? null : job.payload);
  if (text === undefined) throw new WeirError('cannot encode payload as JSON');
  return text;
}

/**
 * Enqueues jobs into one weir queue over an ioredis client.
 *
 * Job options (enqueue's `options`, or the fields of an enqueueBulk job beside `kind` and
 * `payload`): id, priority ('high' | 'normal' | 'low'), delay (ms), runAt (Date or epoch
 * ms), maxAttempts, traceId, uniqueFor (ms: a job whose unique key was enqueued within the
 * window, by any producer in any language, is skipped, even if that job is done),
 * uniqueKey (what the window dedupes on; default the id), key (the job's key: the
 * tenant, customer or destination host that per-key limits count it against; same
 * alphabet as ids), payloadJson (the payload as JSON text, stored byte for byte) instead
 * of payload.
 */
class Producer {
  /** `compactEnvelopes`: write a fresh job with a generated id, 5 attempts and normal
   * priority as weir's compact envelope (61 bytes fewer; docs/protocol.md). Only for
   * queues whose consumers all read it (weir releases from the compact form on). */
  constructor(redis, queue, { defaultMaxAttempts = DEFAULT_MAX_ATTEMPTS, maxEnvelopeBytes = DEFAULT_MAX_ENVELOPE_BYTES, compactEnvelopes = false } = {}) {
    this.redis = redis;
    this.queue = queue;
    this.keys = [...queueKeys(queue), QUEUES];
    this.defaultMaxAttempts = Math.max(1, defaultMaxAttempts);
    this.maxEnvelopeBytes = maxEnvelopeBytes;
    this.compactEnvelopes = compactEnvelopes;
    this.checked = false;
  }

  /** Enqueues one job; resolves to its id, or null if it was skipped as a duplicate
   * (enqueueOutcome says which kind). */
  async enqueue(kind, payload, options = {}) {
    const { id, outcome } = await this.enqueueOutcome(kind, payload, options);
    return outcome === ENQUEUED ? id : null;
  }

  /**
   * Enqueues one job; resolves to {id, outcome}: outcome ENQUEUED ('enqueued'),
   * DUPLICATE_ID ('duplicate_id': a job with its chosen id exists) or UNIQUE_KEY_HELD
   * ('unique_key_held': a job enqueued within the window holds its unique key).
   */
  async enqueueOutcome(kind, payload, options = {}) {
    const job = this.prepare({ ...options, kind, payload }, Date.now());
    const dups = await this.call([job]);
    if (!dups.length) return { id: job.id, outcome: ENQUEUED };
    // The script checks a chosen id before the unique key: a generated id was refused
    // for its key, a chosen id without a window for the id; with both, look for the id.
    const [, , , chosen, window] = job.section.split(' ');
    let taken = chosen === '1';
    if (taken && window !== '0') taken = Number(await this.redis.hexists(this.keys[6], job.id)) === 1;
    return { id: job.id, outcome: taken ? DUPLICATE_ID : UNIQUE_KEY_HELD };
  }

  /** Enqueues one job to run after `delayMs`. */
  enqueueIn(delayMs, kind, payload, options = {}) {
    return this.enqueue(kind, payload, { ...options, delay: delayMs });
  }

  /** Enqueues one job to run at `when` (a Date or epoch ms). */
  enqueueAt(when, kind, payload, options = {}) {
    return this.enqueue(kind, payload, { ...options, runAt: when });
  }

  /**
   * Enqueues many jobs ({kind, payload, ...options}), up to BULK_CHUNK per call. Every job
   * is checked before anything is sent: a bad one throws WeirError with nothing enqueued.
   * Resolves to {enqueued, duplicates}.
   */
  async enqueueBulk(jobs) {
    const now = Date.now();
    const prepared = Array.from(jobs, (j) => this.prepare(j, now));
    const report = { enqueued: 0, duplicates: [] };
    let i = 0;
    while (i < prepared.length) {
      let end = i;
      let bytes = 0;
      while (end < prepared.length && end - i < BULK_CHUNK && bytes < BULK_CHUNK_BYTES) {
        bytes += prepared[end].envelope.length;
        end += 1;
      }
      const dups = await this.call(prepared.slice(i, end));
      report.enqueued += end - i - dups.length;
      report.duplicates.push(...dups);
      i = end;
    }
    return report;
  }

  /** Checks that Redis has a weir library of this package's protocol (done once, before
   * the first enqueue). */
  async checkLibrary() {
    const reply = await whenLoaded(() => this.redis.call('FCALL_RO', 'weir_version', 0));
    const [protocol, version] = reply;
    if (Number(protocol) !== PROTOCOL) {
      throw new WeirError(`the weir library in Redis speaks protocol ${protocol} (weir ${version}); this package speaks protocol ${PROTOCOL}`);
    }
    this.checked = true;
  }

  async call(jobs) {
    if (!this.checked) await this.checkLibrary();
    const args = [];
    let s = 0;
    while (s < jobs.length) {
      let e = s + 1;
      while (e < jobs.length && jobs[e].section === jobs[s].section) e += 1;
      args.push(...jobs[s].section.split(' '), e - s);
      for (let k = s; k < e; k += 1) args.push(jobs[k].id, jobs[k].envelope);
      s = e;
    }
    return whenLoaded(() => this.redis.call('FCALL', 'weir_enqueue', this.keys.length, ...this.keys, ...args));
  }

  prepare(job, nowMs) {
    token('job kind', job.kind);
    const chosen = job.id !== undefined && job.id !== null;
    const time = chosen || !this.compactEnvelopes ? null : timeId(nowMs);
    const id = chosen ? token('job id', job.id) : time || newId();
    const priority = PRIORITIES[job.priority === undefined ? 'normal' : job.priority];
    if (priority === undefined) throw new WeirError(`unknown priority ${JSON.stringify(job.priority)}: use high, normal or low`);
    // 0 is one run, as the Rust producer takes it; only a missing value means the default
    const maxAttempts = Math.max(1, job.maxAttempts ?? this.defaultMaxAttempts);
    const window = wholeMs('uniqueFor', job.uniqueFor);
    // the compact form (attempt 0, 5 attempts, normal priority, its id's time) where it says it all
    let head = time !== null && maxAttempts === 5 && priority === 1
      ? `{"id":"${id}","kind":"${job.kind}"`
      : `{"attempt":0,"max_attempts":${maxAttempts},"priority":${priority},"enqueued_at":${nowMs},"id":"${id}","kind":"${job.kind}"`;
    if (job.traceId !== undefined && job.traceId !== null) head += `,"trace_id":"${token('trace id', job.traceId)}"`;
    if (window > 0) {
      const key = job.uniqueKey === undefined || job.uniqueKey === null ? id : token('unique key', job.uniqueKey);
      head += `,"unique_key":"${key}"`;
    }
    // the job's key for per-key limits: after unique_key, before payload
    if (job.key !== undefined && job.key !== null) head += `,"key":"${token('job key', job.key)}"`;
    // the job's own retry rule: after key, before payload; wins over its kind's and queue's
    if (job.retry !== undefined && job.retry !== null) head += `,"retry":"${retryRule(job.retry)}"`;
    const envelope = Buffer.from(`${head},"payload":${payloadJson(job)}}`, 'utf8');
    if (envelope.length > this.maxEnvelopeBytes) {
      throw new WeirError(`job ${JSON.stringify(id)} is ${envelope.length} bytes, over the limit of ${this.maxEnvelopeBytes} bytes`);
    }
    // priority, delay ms, run_at ms, id chosen (0/1), unique_for ms: one string, so
    // consecutive jobs that share it travel as one section
    const section = [priority, wholeMs('delay', job.delay), runAtMs(job.runAt), chosen ? 1 : 0, window].join(' ');
    return { id, section, envelope };
  }
}

const { Worker, Retry, Fatal, Backpressure, EXEC_PROTOCOL } = require('./worker');

module.exports = {
  Producer, WeirError, queueKeys, PROTOCOL, BULK_CHUNK, ENQUEUED, DUPLICATE_ID, UNIQUE_KEY_HELD,
  Worker, Retry, Fatal, Backpressure, EXEC_PROTOCOL,
};
