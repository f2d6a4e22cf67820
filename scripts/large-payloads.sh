#!/usr/bin/env bash
# Large payloads: JOBS jobs of KIB KiB drained by `weir work --handler noop --concurrency 64
# --drain`, against a plain redis-py loop (LPOP 10 + json.loads) over the same lines, each
# side on a fresh private redis-server, the sides in turn within each round:
#
#   bash scripts/large-payloads.sh [JOBS] [KIB] [ROUNDS] [WEIR...]   # defaults 300 900 3 target/release/weir
#   WORK_ARGS="--handler sleep:200ms --concurrency 256" bash scripts/large-payloads.sh 1500 900 1
#
# WORK_ARGS replaces the drain's handler and concurrency (default: --handler noop
# --concurrency 64).
# Each weir binary loads the jobs with `weir enqueue FILE` and drains them as a user would;
# several binaries (a build before a change, one after) run in the same rounds. Per run:
# jobs/s drained, the drain's peak RSS (MB, /usr/bin/time), the bytes the jobs take in
# Redis once stored (MB, used_memory after the load less before), and Redis's peak memory
# over the whole run (used_memory_peak, MB). The end prints the medians and each weir's
# ratio to the plain loop's rate, round by round.
# The plain loop needs the redis package for Python: PYTHON names an interpreter that has
# it (default: the peers harness's venv, /tmp/weir-peers-bench/.venv, when there).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-300}
KIB=${2:-900}
ROUNDS=${3:-3}
shift $(( $# > 3 ? 3 : $# ))
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(target/release/weir)
for b in "${BINS[@]}"; do [ -x "$b" ] || { echo "no weir binary at $b" >&2; exit 2; }; done
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  PY=python3
  [ -x /tmp/weir-peers-bench/.venv/bin/python ] && PY=/tmp/weir-peers-bench/.venv/bin/python
fi
"$PY" -c 'import redis' 2>/dev/null || { echo "$PY has no redis package: set PYTHON" >&2; exit 2; }
D=$(mktemp -d)
RPID=
stop_redis() { [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null; RPID=; }
trap 'stop_redis; rm -rf "$D"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_redis() {
  PORT=$(port)
  redis-server --port "$PORT" --save '' --appendonly no --dir "$D" >/dev/null &
  RPID=$!
  until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.05; done
}
mem() { redis-cli -p "$PORT" info memory | tr -d '\r' | awk -F: -v k="$1" '$1 == k { print $2 }'; }

python3 - "$JOBS" "$KIB" "$D/jobs.ndjson" <<'PY'
import json, sys
jobs, kib, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
body = "x" * (kib * 1024 - 64)
with open(path, "w") as f:
    for i in range(jobs):
        f.write(json.dumps({"kind": "big", "payload": {"n": i, "body": body}}) + "\n")
PY

PLAIN=$(cat <<'PY'
import json, sys, time, redis
r = redis.Redis(port=int(sys.argv[1]))
with open(sys.argv[2]) as f:
    lines = f.read().splitlines()
for i in range(0, len(lines), 10):
    r.rpush("plain", *lines[i:i + 10])
t = time.monotonic()
n = 0
while True:
    got = r.lpop("plain", 10)
    if not got:
        break
    for b in got:
        json.loads(b)
        n += 1
print(f"{n / (time.monotonic() - t):.1f}")
PY
)

echo "# $JOBS jobs of $KIB KiB, $ROUNDS rounds, weir work ${WORK_ARGS:---handler noop --concurrency 64}; rate jobs/s, RSS and memory in MB"
printf '%-6s %-28s %9s %8s %9s %9s %7s\n' round side rate rss stored redis_pk ratio > "$D/rows"
for r in $(seq 1 "$ROUNDS"); do
  start_redis
  plain=$("$PY" -c "$PLAIN" "$PORT" "$D/jobs.ndjson")
  pk=$(( $(mem used_memory_peak) / 1048576 ))
  stop_redis
  printf '%-6s %-28s %9s %8s %9s %9s %7s\n' "$r" plain-redis-py "$plain" - - "$pk" 1 >> "$D/rows"
  for b in "${BINS[@]}"; do
    start_redis
    base=$(mem used_memory)
    "$b" enqueue -q big --create --redis-url "redis://127.0.0.1:$PORT" "$D/jobs.ndjson" >/dev/null 2>&1
    stored=$(( ($(mem used_memory) - base) / 1048576 ))
    start=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$D/time" "$b" work -q big --redis-url "redis://127.0.0.1:$PORT" \
      ${WORK_ARGS:---handler noop --concurrency 64} --drain --no-metrics >/dev/null 2>"$D/work.err" ||
      { cat "$D/work.err" >&2; exit 1; }
    end=$(date +%s.%N)
    left=$(redis-cli -p "$PORT" llen 'weir:{big}:ready:normal' | tr -d '\r')
    [ "$left" = 0 ] || { echo "$b left $left jobs" >&2; exit 1; }
    rate=$(python3 -c "print(f'{$JOBS / ($end - $start):.1f}')")
    rss=$(( $(tail -1 "$D/time") / 1024 ))
    pk=$(( $(mem used_memory_peak) / 1048576 ))
    stop_redis
    ratio=$(python3 -c "print(f'{$rate / $plain:.2f}')")
    printf '%-6s %-28s %9s %8s %9s %9s %7s\n' "$r" "$b" "$rate" "$rss" "$stored" "$pk" "$ratio" >> "$D/rows"
  done
done
cat "$D/rows"
python3 - "$D/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
print("# medians")
for side in dict.fromkeys(r[1] for r in rows):
    mine = [r for r in rows if r[1] == side]
    med = lambda i: statistics.median(float(r[i]) for r in mine) if mine[0][i] != "-" else "-"
    print(f"{side:<28} rate {med(2)} rss {med(3)} stored {med(4)} redis_peak {med(5)} ratio {med(6)}")
PY
