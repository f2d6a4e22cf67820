#!/usr/bin/env bash
# The mixed soak: features tried together, the way a fleet meets them.
#
# Two `weir work` consumers, each adaptive with per-key limits (--adaptive
# --adaptive-per-key), drain jobs of one hot key and 40 others, in three priorities, some
# delayed, through the HTTP handler, from a service (scripts/soak_service.py) that answers
# 5% of requests 429 (Retry-After: 1) and 5% a plain 500. Mid-run each consumer is killed
# once with SIGKILL and started again, and the queue's per-key limits change three times.
#
# It passes when every job was acked at least once (the service answered 200 for it), none
# is dead, nothing is left (ready, delayed, in flight, suspect, parked) and no record of a
# job is left in Redis (the jobs, errors, deferrals, start-mark and lease-token hashes are
# empty). It prints one RESULT line and exits 1 on any failure.
#
#   bash scripts/soak.sh                       # 20,000 jobs (a few minutes)
#   SOAK_JOBS=200000 SOAK_CAP=3600 bash scripts/soak.sh   # as long as one wants
#   WEIR_BIN=target/debug/weir SOAK_JOBS=2000 bash scripts/soak.sh   # CI's smoke run
#
# Needs redis-server and python3. Everything runs on loopback ports it picks, in a
# temporary directory it removes; it ends only the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${SOAK_JOBS:-20000}
CAP=${SOAK_CAP:-900}          # seconds the drain may take before the run fails
SEED=${SOAK_SEED:-1}
if [ -z "${WEIR_BIN:-}" ]; then
  cargo build --quiet --release --bin weir
  WEIR_BIN=target/release/weir
fi
WEIR=$(realpath "$WEIR_BIN")
DIR=$(mktemp -d)
PIDS=()
cleanup() {
  exec 2>/dev/null # the shell's own notes of the processes it kills here
  for pid in "${PIDS[@]}"; do kill -9 "$pid" || true; done
  wait
  rm -rf "$DIR"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
log() { echo "soak: $*" >&2; }

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
  --logfile "$DIR/redis.log" --daemonize no &
PIDS+=($!)
SVC_PORT=$(free_port)
python3 scripts/soak_service.py --port "$SVC_PORT" --seed "$SEED" &
PIDS+=($!)
URL="redis://127.0.0.1:$REDIS_PORT"
Q=soak
summary() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "http://127.0.0.1:$SVC_PORT/summary"; }
rc() { redis-cli -p "$REDIS_PORT" "$@"; }
weir() { "$WEIR" "$@" --redis-url "$URL" --queue "$Q"; }
for _ in $(seq 100); do
  rc ping >/dev/null 2>&1 && summary >/dev/null 2>&1 && break
  sleep 0.1
done

# The jobs: a third of key `hot`, the rest over 40 keys; priorities mixed; one in ten
# delayed by 1-4 s; a few ms of service time each (the hot key's a little longer).
python3 - "$JOBS" "$SEED" >"$DIR/jobs.ndjson" <<'EOF'
import json, random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
for i in range(n):
    hot = rng.random() < 1 / 3
    job = {"id": f"soak-{i}", "kind": "hook", "key": "hot" if hot else f"k{rng.randrange(40)}",
           "priority": rng.choice(["high", "normal", "normal", "low"]),
           "payload": {"i": i, "ms": 8 if hot else rng.choice([2, 4, 6])}}
    if rng.random() < 0.1:
        job["delay"] = f"{rng.randint(1, 4)}s"
    print(json.dumps(job))
EOF

# Jobs carry the default 5 attempts; a plain 500 comes one time in twenty, so five in a
# row is one job in 3.2 million: a dead job here is weir's fault.
consumer() {
  WEIR_LOG=warn "$WEIR" work --redis-url "$URL" --queue "$Q" --handler "http://127.0.0.1:$SVC_PORT/hook" \
    --adaptive --adaptive-per-key --concurrency 32 --max-concurrency 128 \
    --visibility-timeout 3s --metrics-addr 127.0.0.1:0 >>"$DIR/consumer.log" 2>&1 &
  echo $!
}
A=$(consumer); PIDS+=("$A")
B=$(consumer); PIDS+=("$B")
weir enqueue "$DIR/jobs.ndjson" >/dev/null
log "$JOBS jobs enqueued; consumers $A and $B"

acked() { summary | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["ok"]))'; }
wait_acked() {
  local want=$1
  while [ "$(acked)" -lt "$want" ]; do
    [ $SECONDS -lt "$CAP" ] || return 1
    sleep 0.5
  done
}

# Mid-run: a kill -9 and a limit change at each mark. The first quarter runs with no
# per-key concurrency set, so the keys' running sets are filled by the adaptive per-key
# limiters alone before a limit counts them.
start=$SECONDS
if wait_acked $((JOBS / 4)); then
  kill -9 "$A"; A=$(consumer); PIDS+=("$A")
  weir limits set --per-key-concurrency 4 --key-concurrency hot=2 >/dev/null
  log "at $((JOBS / 4)) acked: killed one consumer, per-key concurrency 4 (hot 2)"
fi
if wait_acked $((JOBS / 2)); then
  weir limits set --global-concurrency 48 >/dev/null
  kill -9 "$B"; B=$(consumer); PIDS+=("$B")
  log "at $((JOBS / 2)) acked: killed the other, global concurrency 48"
fi
if wait_acked $((JOBS * 3 / 4)); then
  weir limits clear --per-key --global-concurrency >/dev/null
  log "at $((JOBS * 3 / 4)) acked: per-key and global limits cleared"
fi
wait_acked "$JOBS" || true

# Left in Redis: wait (bounded) for the last settles, then look.
left() {
  local n=0
  for k in ready:high ready:normal ready:low suspects; do n=$((n + $(rc LLEN "weir:{$Q}:$k"))); done
  for k in delayed:high delayed:normal delayed:low lease; do n=$((n + $(rc ZCARD "weir:{$Q}:$k"))); done
  for k in $(rc --scan --pattern "weir:{$Q}:keylimit:parked:*"); do
    [ "$(rc TYPE "$k")" != list ] || n=$((n + $(rc LLEN "$k")))
  done
  echo $n
}
while [ "$(left)" -gt 0 ] && [ $SECONDS -lt "$CAP" ]; do sleep 0.5; done
kill -TERM "$A" "$B" 2>/dev/null || true
wait "$A" "$B" 2>/dev/null || true
elapsed=$((SECONDS - start))

read -r ok_ids runs dups answers <<<"$(summary | python3 -c '
import json, sys
s = json.load(sys.stdin)
ok = s["ok"]
print(len(ok), sum(ok.values()), sum(1 for c in ok.values() if c > 1), json.dumps(s["answers"], separators=(",", ":")))
')"
dead=$(rc ZCARD "weir:{$Q}:dead")
orphans=0
for k in jobs errors deferrals started lease_tokens; do
  n=$(rc HLEN "weir:{$Q}:$k")
  [ "$n" -eq 0 ] || log "left in $k: $n"
  orphans=$((orphans + n))
done
remaining=$(left)
# The longest command Redis ran (its slow log keeps the 128 latest over 10 ms), named by
# script where it was one: a script that runs for seconds stalls every client (BUSY).
slowest=$(rc --json SLOWLOG GET 128 2>/dev/null | python3 -c '
import glob, hashlib, json, os, sys
lib = open("src/queue/scripts/lib.lua", "rb").read()
names = {}
for f in glob.glob("src/queue/scripts/*.lua"):
    # with and without the shebang scripts.rs puts before some (ALLOW_OOM)
    for head in (b"", b"#!lua flags=allow-oom\n"):
        names[hashlib.sha1(head + lib + open(f, "rb").read()).hexdigest()] = os.path.basename(f)[:-4]
entries = json.load(sys.stdin) or [[0, 0, 0, ["none"]]]
e = max(entries, key=lambda e: e[2])
args = e[3]
what = names.get(args[1], args[1]) if args[0].lower() in ("evalsha", "fcall") and len(args) > 1 else args[0]
print(f"{e[2] // 1000}ms:{what}")
' || echo unknown)
status=pass
[ "$ok_ids" -eq "$JOBS" ] && [ "$dead" -eq 0 ] && [ "$remaining" -eq 0 ] && [ "$orphans" -eq 0 ] || status=FAIL
echo "RESULT soak $status jobs=$JOBS acked_once_or_more=$ok_ids ok_runs=$runs acked_twice_or_more=$dups dead=$dead left=$remaining orphan_records=$orphans slowest_redis_call=$slowest answers=$answers seconds=$elapsed"
if [ "$status" != pass ]; then
  tail -20 "$DIR/consumer.log" >&2
  exit 1
fi
