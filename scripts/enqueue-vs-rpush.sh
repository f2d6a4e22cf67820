#!/usr/bin/env bash
# `weir enqueue` of an NDJSON file against raw RPUSH of the same lines, side by side on one
# private redis-server:
#
#   bash scripts/enqueue-vs-rpush.sh [JOBS] [ROUNDS] [WEIR...]   # defaults 1000000 7 target/release/weir
#
# The input is JOBS lines `{"kind":"bench","payload":{...}}` whose payloads are 100 bytes
# of JSON. Raw RPUSH is Redis's own mass insertion: the same lines as RPUSH commands of
# 1,000 items (weir's bulk chunk) written ahead of time as RESP, then sent by
# `redis-cli --pipe`, which waits for no reply until the end: no parsing, no envelope, no
# id, nothing checked. Beside it, when target/release/weir-loadtest is built, a client's
# raw RPUSH of the same lines (`weir-loadtest rpush`: redis-rs, weir's chunks and calls in
# flight, the file read as it pushes). A second reference sends, the same way as the
# first, the transactions weir's bulk path sends (MULTI, RPUSH of 1,000 envelopes,
# HINCRBY, PUBLISH, SADD, SET, EXEC) with the envelopes the first binary stored for this
# input: what Redis takes for weir's bytes (an envelope is about 100 bytes longer than its line) when the client costs
# nothing. Each weir binary runs `weir enqueue FILE` as a user runs it. Every side is
# timed as a whole process on an emptied server, the sides in turn within each round;
# each round prints its rates and each weir's ratio to that round's RPUSH of the lines,
# and the end prints the medians (of the rates, and of the rounds' ratios: to the lines'
# RPUSH and to the envelopes'), Redis's CPU per job and each weir's own CPU per job
# (user + system: on a busy machine the rates move with what else runs, the CPU per job
# much less). Several WEIR binaries (a build before a change, one after) are measured in
# the same rounds, in turn, the first of them changing from round to round.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-1000000}
ROUNDS=${2:-7}
shift $(( $# > 2 ? 2 : $# ))
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(target/release/weir)
for b in "${BINS[@]}"; do [ -x "$b" ] || { echo "no weir binary at $b" >&2; exit 2; }; done
source scripts/private-redis.sh
LOADTEST=target/release/weir-loadtest

python3 - "$JOBS" "$D/jobs.ndjson" "$D/rpush.resp" <<'PY'
import sys
n, ndjson, resp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lines = []
for i in range(n):
    head = '{"n":%d,"to":"user%d@example.com","pad":"' % (i, i)
    payload = head + "x" * (100 - len(head) - 2) + '"}'
    assert len(payload) == 100
    lines.append(('{"kind":"bench","payload":%s}' % payload).encode())
with open(ndjson, "wb") as f:
    f.write(b"\n".join(lines) + b"\n")
key = b"raw:ready"
with open(resp, "wb") as f:
    for at in range(0, n, 1000):
        chunk = lines[at:at + 1000]
        out = [b"*%d\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n" % (len(chunk) + 2, len(key), key)]
        out += [b"$%d\r\n%s\r\n" % (len(l), l) for l in chunk]
        f.write(b"".join(out))
PY

cpu() { redis-cli -p "$PORT" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}'; }
# Runs "$@" on an emptied server; prints "<jobs/s> <Redis CPU µs per job> <the client's
# CPU µs per job>" and checks that the jobs are all stored (every list's length, summed).
side() {
  redis-cli -p "$PORT" flushall >/dev/null
  local c0 t0 t1 c1 stored
  c0=$(cpu)
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$D/time" "$@" >"$D/out" 2>"$D/err" || { cat "$D/out" "$D/err" >&2; exit 1; }
  t1=$(date +%s.%N)
  c1=$(cpu)
  stored=$(redis-cli -p "$PORT" eval "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do
      if redis.call('TYPE', k).ok == 'list' then n = n + redis.call('LLEN', k) end end return n" 0)
  [ "$stored" -eq "$JOBS" ] || { echo "stored $stored of $JOBS: $*" >&2; cat "$D/out" "$D/err" >&2; exit 1; }
  python3 -c "import sys; n, t0, t1, c0, c1, u, s = int(sys.argv[1]), *map(float, sys.argv[2:]); print(f'{n / (t1 - t0):.0f} {(c1 - c0) / n * 1e6:.3f} {(u + s) / n * 1e6:.3f}')" \
    "$JOBS" "$t0" "$t1" "$c0" "$c1" $(tail -n 1 "$D/time")
}

# The envelopes the first binary stores for this input, as weir's transactions.
redis-cli -p "$PORT" flushall >/dev/null
"${BINS[0]}" enqueue "$D/jobs.ndjson" -q bench --create --redis-url "$U" >/dev/null
redis-cli -p "$PORT" --raw lrange 'weir:{bench}:ready:normal' 0 -1 >"$D/envelopes"
python3 - "$D/envelopes" "$D/envelopes.resp" <<'PY'
import sys
items = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
with open(sys.argv[2], "wb") as f:
    for at in range(0, len(items), 1000):
        chunk = items[at:at + 1000]
        f.write(cmd(b"MULTI") + cmd(b"RPUSH", b"raw:{bench}:ready", *chunk)
                + cmd(b"HINCRBY", b"raw:{bench}:counters", b"enqueued", len(chunk))
                + cmd(b"PUBLISH", b"raw:{bench}:wake", b"enqueue") + cmd(b"SADD", b"raw:queues", b"bench")
                + cmd(b"SET", b"raw:{bench}:chunk:%d" % at, b"1", b"PX", b"60000") + cmd(b"EXEC"))
print(f"envelopes: {sum(map(len, items)) / len(items):.0f} bytes on average", file=sys.stderr)
PY

echo "$JOBS jobs, 100-byte payloads ($(wc -c <"$D/jobs.ndjson") bytes of NDJSON), $ROUNDS rounds, redis $(redis-server --version | awk '{print $3}')"
: >"$D/results"
for r in $(seq 1 "$ROUNDS"); do
  read -r raw raw_cpu _ < <(side redis-cli -p "$PORT" --pipe <"$D/rpush.resp")
  read -r env env_cpu _ < <(side redis-cli -p "$PORT" --pipe <"$D/envelopes.resp")
  line="round $r: raw RPUSH $raw jobs/s, of weir's envelopes $env"
  if [ -x "$LOADTEST" ]; then
    read -r cl cl_cpu cl_client < <(side "$LOADTEST" rpush "$D/jobs.ndjson" --redis-url "$U")
    echo "client $cl $cl_cpu $cl_client" >>"$D/results"
    line+=", by a client $cl (client $cl_client µs/job)"
  fi
  echo "rpush $raw $raw_cpu" >>"$D/results"
  echo "envelopes $env $env_cpu" >>"$D/results"
  # The binaries in turn, starting from the next one each round.
  for k in "${!BINS[@]}"; do
    i=$(( (k + r) % ${#BINS[@]} ))
    read -r w w_cpu w_client < <(side "${BINS[$i]}" enqueue "$D/jobs.ndjson" -q bench --create --redis-url "$U")
    ratio=$(python3 -c "print(f'{$w / $raw:.2f} {$w / $env:.2f}')")
    echo "weir$i $w $w_cpu $ratio $w_client" >>"$D/results"
    line+="; ${BINS[$i]} $w jobs/s (${ratio% *}x, client ${w_client} µs/job)"
  done
  echo "$line"
done
python3 - "$D/results" "${BINS[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
raw = [float(r[1]) for r in rows if r[0] == "rpush"]
raw_cpu = [float(r[2]) for r in rows if r[0] == "rpush"]
print(f"raw RPUSH: median {med(raw):,.0f} jobs/s, Redis CPU {med(raw_cpu):.3f} µs per job")
cl = [r for r in rows if r[0] == "client"]
if cl:
    print(f"a client's raw RPUSH of the lines: median {med([float(r[1]) for r in cl]):,.0f} jobs/s, "
          f"Redis CPU {med([float(r[2]) for r in cl]):.3f} µs per job, the client's CPU {med([float(r[3]) for r in cl]):.3f} µs per job")
env = [r for r in rows if r[0] == "envelopes"]
print(f"raw RPUSH of weir's envelopes: median {med([float(r[1]) for r in env]):,.0f} jobs/s, "
      f"Redis CPU {med([float(r[2]) for r in env]):.3f} µs per job")
for i, b in enumerate(sys.argv[2:]):
    mine = [r for r in rows if r[0] == f"weir{i}"]
    rate = med([float(r[1]) for r in mine])
    cpu = med([float(r[2]) for r in mine])
    ratio = med([float(r[3]) for r in mine])
    to_env = med([float(r[4]) for r in mine])
    client = med([float(r[5]) for r in mine])
    print(f"{b} enqueue: median {rate:,.0f} jobs/s, Redis CPU {cpu:.3f} µs per job, the client's CPU {client:.3f} µs per job; "
          f"weir/RPUSH {ratio:.2f}x, weir/RPUSH of its envelopes {to_env:.2f}x (medians of the rounds' ratios)")
PY
