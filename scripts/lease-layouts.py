#!/usr/bin/env python3
"""Redis CPU per job of candidate lease layouts, side by side on one private redis-server.

    target/bench-venv/bin/python scripts/lease-layouts.py [JOBS] [ROUNDS] [BATCH]
    # defaults 200000 3 500; needs redis-server on PATH and redis-py:
    # python3 -m venv target/bench-venv && target/bench-venv/bin/pip install redis

Each layout drains JOBS items of about 130 bytes (a weir inline envelope's size) from one
list, BATCH per fetch, one client, and is timed by Redis's own CPU (INFO cpu, user +
system) around the drain. The layouts, each a fetch and an ack of every item:

  bare        the bare reliable drain (loadtest/src/bare.rs, ../shared/peers/ceiling):
              Lua LPOP + ZADD of each item with a deadline; Lua ZREM of each item
  lpop        plain LPOP BATCH, no lease at all: the floor
  lua-concat  Lua LPOP, the items joined into one hash entry + one ZADD of the batch;
              ack: ZREM + HDEL of the batch (the items pass through Lua twice)
  sort-store  Lua: SORT list BY nosort LIMIT 0 BATCH STORE batch-list, LTRIM, ZADD of
              the batch; the client's LRANGE of batch-list in the same pipeline; ack: ZREM
              + DEL of the batch (no item passes through Lua)
  sort-split  sort-store, but every other batch is broken up before its ack: a Lua call
              moves its items into per-item lease entries (LRANGE + ZADD each, as a
              partial outcome or an expiry would), then a ZREM of each item

Each round runs every layout once on a freshly filled list; the end prints each layout's
median CPU per job and its ratio to bare's median.
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

JOBS = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 500
LEASE_MS = 30_000

ENVELOPE = json.dumps({"id": "01JBX8Q4M6Z3T7V2K9W5R1N0PA", "kind": "noop",
                       "payload": {"t": "1733400000123456", "p": "x" * 15},
                       "attempt": 0, "enqueued_at": 1733400000000}, separators=(",", ":"))

BARE_FETCH = """
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ARGV[2]
local items = redis.call('LPOP', KEYS[1], ARGV[1])
if not items then return {} end
local z = {}
for i = 1, #items do z[2 * i - 1] = deadline; z[2 * i] = items[i] end
redis.call('ZADD', KEYS[2], unpack(z))
return items"""
BARE_ACK = "return redis.call('ZREM', KEYS[1], unpack(ARGV))"
CONCAT_FETCH = """
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ARGV[2]
local items = redis.call('LPOP', KEYS[1], ARGV[1])
if not items then return {} end
redis.call('HSET', KEYS[3], ARGV[3], table.concat(items, '\\n'))
redis.call('ZADD', KEYS[2], deadline, ARGV[3])
return items"""
CONCAT_ACK = "redis.call('ZREM', KEYS[1], ARGV[1]); return redis.call('HDEL', KEYS[2], ARGV[1])"
SORT_FETCH = """
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ARGV[2]
local n = redis.call('SORT', KEYS[1], 'BY', 'nosort', 'LIMIT', 0, ARGV[1], 'STORE', KEYS[3])
if n == 0 then return 0 end
redis.call('LTRIM', KEYS[1], n, -1)
redis.call('ZADD', KEYS[2], deadline, KEYS[3])
return n"""
SORT_ACK = "redis.call('ZREM', KEYS[1], KEYS[2]); return redis.call('DEL', KEYS[2])"
SPLIT = """
local score = redis.call('ZSCORE', KEYS[1], KEYS[2])
if not score then return 0 end
local items = redis.call('LRANGE', KEYS[2], 0, 3999)
local z = {}
for i = 1, #items do z[2 * i - 1] = score; z[2 * i] = items[i] end
if #z > 0 then redis.call('ZADD', KEYS[1], unpack(z)) end
redis.call('ZREM', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2])
return #items"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    assert 1 <= BATCH <= 4000, "BATCH must be 1..4000 (one ZADD's unpack)"
    d = tempfile.mkdtemp()
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                               "--dir", d], stdout=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        run(r)
    finally:
        server.terminate()
        server.wait()


def run(r):
    bare_fetch, bare_ack = r.register_script(BARE_FETCH), r.register_script(BARE_ACK)
    concat_fetch, concat_ack = r.register_script(CONCAT_FETCH), r.register_script(CONCAT_ACK)
    sort_fetch, sort_ack = r.register_script(SORT_FETCH), r.register_script(SORT_ACK)
    split = r.register_script(SPLIT)

    def bare():
        done = 0
        while items := bare_fetch(keys=["q", "lease"], args=[BATCH, LEASE_MS]):
            bare_ack(keys=["lease"], args=items)
            done += len(items)
        return done

    def lpop():
        done = 0
        while items := r.lpop("q", BATCH):
            done += len(items)
        return done

    def lua_concat():
        done, seq = 0, 0
        while True:
            seq += 1
            items = concat_fetch(keys=["q", "lease", "batches"], args=[BATCH, LEASE_MS, seq])
            if not items:
                return done
            concat_ack(keys=["lease", "batches"], args=[seq])
            done += len(items)

    def sort_store(split_every=0):
        done, seq = 0, 0
        while True:
            seq += 1
            batch = f"b:{seq}"
            p = r.pipeline(transaction=False)
            sort_fetch(keys=["q", "lease", batch], args=[BATCH, LEASE_MS], client=p)
            p.lrange(batch, 0, -1)
            n, items = p.execute()
            if n == 0:
                return done
            assert n == len(items)
            if split_every and seq % split_every == 0:
                split(keys=["lease", batch])
                bare_ack(keys=["lease"], args=items)
            else:
                sort_ack(keys=["lease", batch])
            done += n

    layouts = [("bare", bare), ("lpop", lpop), ("lua-concat", lua_concat),
               ("sort-store", sort_store), ("sort-split", lambda: sort_store(2))]
    got = {name: [] for name, _ in layouts}
    for rnd in range(1, ROUNDS + 1):
        line = []
        for name, drain in layouts:
            r.flushall()
            pipe = r.pipeline(transaction=False)
            for i in range(0, JOBS, 1000):
                pipe.rpush("q", *([ENVELOPE] * min(1000, JOBS - i)))
            pipe.execute()
            cpu0 = cpu(r)
            drained = drain()
            us = (cpu(r) - cpu0) / JOBS * 1e6
            assert drained == JOBS and r.llen("q") == 0 and r.zcard("lease") == 0, name
            got[name].append(us)
            line.append(f"{name} {us:.3f}")
        print(f"round {rnd}: Redis CPU us/job: " + ", ".join(line), flush=True)
    bare_us = statistics.median(got["bare"])
    print(f"{JOBS} jobs of {len(ENVELOPE)} bytes, batches of {BATCH}, medians of {ROUNDS} rounds:")
    for name, _ in layouts:
        m = statistics.median(got[name])
        print(f"  {name:11s} {m:6.3f} us/job  {m / bare_us:5.2f}x bare")


def cpu(r):
    i = r.info("cpu")
    return i["used_cpu_user"] + i["used_cpu_sys"]


if __name__ == "__main__":
    main()
