"""The enqueue outcomes of the weir-producer package, for tests/clients_outcomes.rs.

usage: outcomes.py REDIS_URL QUEUE sync|async
  Runs the scenario of tests/clients_outcomes.rs through Producer over redis.Redis
  (sync) or AsyncProducer over redis.asyncio.Redis (async); prints one outcome status per
  line, then `enqueue: <what enqueue returned for a duplicate>` and, for async,
  `bulk: <enqueued> <duplicates>`.
"""

import asyncio
import sys
from datetime import timedelta

import redis
import redis.asyncio
from weir_producer import AsyncProducer, Job, Producer

HOUR = timedelta(hours=1)
# (options) per enqueue, as tests/clients_outcomes.rs's SCENARIO says
SCENARIO = [
    {"id": "o-1"},
    {"id": "o-1"},
    {"unique_key": "u-1", "unique_for": HOUR},
    {"unique_key": "u-1", "unique_for": HOUR},
    {"id": "o-2", "unique_key": "u-1", "unique_for": HOUR},
    {"id": "o-1", "unique_key": "u-2", "unique_for": HOUR},
]


def sync(url, queue):
    p = Producer(redis.Redis.from_url(url), queue)
    for opts in SCENARIO:
        print(p.enqueue_outcome("outcome", {"n": 1}, **opts).status)
    print("enqueue: %r" % (p.enqueue("outcome", 1, id="o-1"),))


async def run_async(url, queue):
    client = redis.asyncio.Redis.from_url(url)
    p = AsyncProducer(client, queue)
    for opts in SCENARIO:
        print((await p.enqueue_outcome("outcome", {"n": 1}, **opts)).status)
    print("enqueue: %r" % (await p.enqueue("outcome", 1, id="o-1"),))
    report = await p.enqueue_bulk([Job("outcome", i) for i in range(3)] + [Job("outcome", 9, id="o-1")])
    print("bulk: %d %s" % (report.enqueued, ",".join(report.duplicates)))
    await client.aclose()


def main():
    url, queue, mode = sys.argv[1:4]
    if mode == "sync":
        sync(url, queue)
    elif mode == "async":
        asyncio.run(run_async(url, queue))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
