import type Redis from 'ioredis';

/** The protocol this package speaks (weir's docs/protocol.md). */
export const PROTOCOL: 1;
/** Jobs per FCALL in enqueueBulk. */
export const BULK_CHUNK: number;

/** A job weir would refuse, or a Redis without a usable weir library. */
export class WeirError extends Error {
  name: 'WeirError';
}

export const ENQUEUED: 'enqueued';
export const DUPLICATE_ID: 'duplicate_id';
export const UNIQUE_KEY_HELD: 'unique_key_held';

/** What enqueueOutcome did: stored, refused because a job with the chosen id exists, or
 * refused because a job enqueued within the window holds the unique key. */
export interface Outcome {
  id: string;
  outcome: 'enqueued' | 'duplicate_id' | 'unique_key_held';
}

/** The keys of `queue`, in the order weir_enqueue takes them. */
export function queueKeys(queue: string): string[];

export interface JobOptions {
  /** A chosen id: refused while a job with it exists. */
  id?: string;
  priority?: 'high' | 'normal' | 'low';
  /** Delay before the job is ready, ms. */
  delay?: number;
  /** When the job is due: a Date or epoch ms. */
  runAt?: Date | number;
  maxAttempts?: number;
  traceId?: string;
  /** A uniqueness window, ms. */
  uniqueFor?: number;
  /** What the window dedupes on (default: the id). */
  uniqueKey?: string;
  /**
   * The job's key: the tenant, customer or destination host that per-key limits count it
   * against (1 to 128 characters from A-Z a-z 0-9 _ . : -; hash longer keys).
   */
  key?: string;
  /**
   * The job's own retry rule (`'sidekiq'`, `'exp:base=1s,factor=2,cap=1h,jitter=0.5'`,
   * `'fixed:10s,1m,attempts=3'`): it wins over the rules `weir retry set` gives its kind
   * and its queue.
   */
  retry?: string;
  /** The payload as JSON text, stored byte for byte (instead of `payload`). */
  payloadJson?: string;
}

export interface Job extends JobOptions {
  kind: string;
  payload?: unknown;
}

export interface BulkReport {
  enqueued: number;
  duplicates: string[];
}

export class Producer {
  constructor(redis: Redis, queue: string, options?: { defaultMaxAttempts?: number; maxEnvelopeBytes?: number; compactEnvelopes?: boolean });
  /** Resolves to the job id, or null if it was skipped as a duplicate. */
  enqueue(kind: string, payload?: unknown, options?: JobOptions): Promise<string | null>;
  /** Resolves to the job id and what happened to it. */
  enqueueOutcome(kind: string, payload?: unknown, options?: JobOptions): Promise<Outcome>;
  enqueueIn(delayMs: number, kind: string, payload?: unknown, options?: JobOptions): Promise<string | null>;
  enqueueAt(when: Date | number, kind: string, payload?: unknown, options?: JobOptions): Promise<string | null>;
  enqueueBulk(jobs: Iterable<Job>): Promise<BulkReport>;
  checkLibrary(): Promise<void>;
}

/** A job as weir's exec handler hands it to a `Worker` handler. */
export interface ExecJob {
  id: string;
  kind: string;
  payload: unknown;
  /** Failed attempts so far (0 on the first run). */
  attempt: number;
  max_attempts: number;
  key?: string;
  /** When weir abandons the run (ms since the epoch), if `weir work --job-timeout` is set. */
  deadline_ms?: number;
}

/** Retry the job, after `after` ms if given (else the queue's backoff). */
export class Retry extends Error {
  constructor(message?: string, options?: { after?: number });
  after?: number;
}
/** Dead-letter the job with this reason. */
export class Fatal extends Error {
  constructor(message?: string);
}
/** Defer the job without charging an attempt, after `after` ms. */
export class Backpressure extends Error {
  constructor(message?: string, options?: { after?: number });
  after?: number;
}

/** The exec protocol version the worker speaks. */
export const EXEC_PROTOCOL: number;

/** A worker run by `weir work --handler exec:'node app.js'` (stdin/stdout protocol). */
export class Worker {
  constructor(options?: { queue?: string; concurrency?: number });
  /** Handles jobs of `kind`: resolving acks, throwing retries (see Retry, Fatal, Backpressure). */
  handle(kind: string, fn: (job: ExecJob) => unknown | Promise<unknown>): this;
  /** Resolves once weir closes stdin and every job is answered. */
  run(options?: { input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream }): Promise<void>;
}
