"""Enqueues jobs through the weir-producer package, for tests/clients.rs.

usage: produce.py REDIS_URL QUEUE MODE N   (WEIR_COMPACT=1: compact envelopes)
  all     N jobs through every call of the package (enqueue, enqueue_in, enqueue_at,
          enqueue_bulk; priorities, chosen ids, job keys, raw JSON); prints
          `id<TAB>key<TAB>payload` per job (key empty for a job without one)
  unique  jobs for keys key-0 .. key-(N-1) with a window of an hour, in bulk; prints
          {"enqueued": E, "duplicates": D}
  attempts  jobs of max_attempts 0, 1, 3 and none, singly and in bulk; prints
          `id<TAB>value` (None for none)
  badkey  bad job keys through enqueue and enqueue_bulk (N unused); prints each refusal
  badretry  bad retry rules the same way
"""

import json
import os
import sys
from datetime import datetime, timedelta, timezone

import redis
from weir_producer import Job, Producer, WeirError

PRIORITIES = ["high", "normal", "low"]


def payload(i):
    """Payloads of many shapes: unicode, escapes, big and float numbers, nesting."""
    shapes = [
        {"i": i, "s": "h\u00e9llo \u2713 \"quoted\" \\ back\tslash\n", "emoji": "\U0001F600"},
        [i, 12345678901234567890 + i, 0.1 * i, -1e-300, True, None],
        {"nested": {"deeper": [{"i": i}, [], {}]}, "empty": ""},
        "just a string %d \u2028 separator" % i,
        i * 7919,
    ]
    return shapes[i % len(shapes)]


def key(i):
    """A job key for three jobs in seven, through every call (none for the rest)."""
    return "py-tenant.%d:eu" % (i % 5) if i % 7 < 3 else None


#: A retry rule for one job in four, each in the form weir writes it (none for the rest).
RETRY = [None, "fixed:1m,10m,attempts=3", "sidekiq:attempts=26",
         "exp:base=5s,factor=3,cap=6h,jitter=0.3,attempts=12"]

BAD_RETRY = ["never", "fixed:", "fixed:soon", "exp:factor=1000", "exp:jitter=2",
             "sidekiq:attempts=0", 'exp:"x"', 7]


def refusals(p, option, bads):
    for bad in bads:
        calls = [lambda: p.enqueue("k", 1, **{option: bad}),
                 lambda: p.enqueue_bulk([Job("k", 1), Job("k", 2, **{option: bad})])]
        for call in calls:
            try:
                call()
            except WeirError as e:
                print(e)
            else:
                sys.exit("%s %r accepted" % (option, bad))


def all_calls(p, n):
    out = []
    bulk = []
    for i in range(n):
        opts = {"priority": PRIORITIES[i % 3], "key": key(i), "retry": RETRY[i % 4]}
        if i % 10 == 0:
            job_id = p.enqueue("py", payload(i), id="py-%d" % i, **opts)
            out.append((job_id, key(i), json.dumps(payload(i), separators=(",", ":"), ensure_ascii=False)))
        elif i % 10 == 1:
            job_id = p.enqueue_in(timedelta(milliseconds=200), "py", payload(i), **opts)
            out.append((job_id, key(i), json.dumps(payload(i), separators=(",", ":"), ensure_ascii=False)))
        elif i % 10 == 2:
            when = datetime.now(timezone.utc) + timedelta(milliseconds=300)
            raw = '{ "raw" : [%d, 1.50, "kept as written"] }' % i
            job_id = p.enqueue_at(when, "py", payload_json=raw, **opts)
            out.append((job_id, key(i), raw))
        elif i % 2 == 0:
            bulk.append(Job("py", payload(i), id="pyb-%d" % i, **opts))
        else:
            bulk.append(Job("py", payload(i), **opts))
    report = p.enqueue_bulk(bulk)
    assert report.enqueued == len(bulk) and not report.duplicates, report
    return out, bulk


def main():
    url, queue, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    # WEIR_COMPACT set: compact envelopes for the jobs they describe
    p = Producer(redis.Redis.from_url(url), queue, compact_envelopes=bool(os.environ.get("WEIR_COMPACT")))
    if mode == "all":
        out, bulk = all_calls(p, n)
        for job_id, job_key, text in out:
            assert job_id, "a single enqueue was skipped"
            print("%s\t%s\t%s" % (job_id, job_key or "", text))
        for job in bulk:
            # generated ids are not returned by enqueue_bulk: '*' (the test matches those
            # by payload; every payload differs)
            text = json.dumps(job.payload, separators=(",", ":"), ensure_ascii=False)
            print("%s\t%s\t%s" % (job.id or "*", job.key or "", text))
    elif mode == "unique":
        jobs = [Job("uniq", {"key": "key-%d" % i, "from": "python"}, unique_key="key-%d" % i,
                    unique_for=timedelta(hours=1)) for i in range(n)]
        report = p.enqueue_bulk(jobs)
        print(json.dumps({"enqueued": report.enqueued, "duplicates": len(report.duplicates)}))
    elif mode == "attempts":
        # each attempts value through enqueue and enqueue_bulk; prints `id<TAB>value`
        values = [0, 1, 3, None]
        for v in values:
            p.enqueue("att", v, id="att-%s" % v, max_attempts=v)
        p.enqueue_bulk([Job("att", v, id="attb-%s" % v, max_attempts=v) for v in values])
        for v in values:
            print("att-%s\t%s\nattb-%s\t%s" % (v, v, v, v))
    elif mode == "badkey":
        refusals(p, "key", ["a b", "", "k" * 129, 'a"b', "tenant/1", 7])
    elif mode == "badretry":
        refusals(p, "retry", BAD_RETRY)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
