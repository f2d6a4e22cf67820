#!/usr/bin/env bash
# What a job costs Redis on a 3-primary cluster against a single server, in instructions:
# every redis-server runs under valgrind's callgrind, which counts the instructions it
# executes whatever else the machine does (INFO cpu on a 2-core machine swings with the
# three primaries and the consumer fighting for the cores; docs/scaling.md has both).
#
#   bash scripts/cluster-cost.sh [JOBS]      # default 1000000; about three minutes
#
# Fewer jobs overstate the cluster's cost: each connection's fixed costs on each primary
# (HELLO, CLUSTER SLOTS, the scripts loaded) weigh more; with batch leases a job costs a
# third of what it did, so they weigh more still (100,000 jobs: 1.11x, 300,000: 1.06x,
# 1,000,000: 1.02x; docs/scaling.md).
#
# Each side: a warm-up load and drain (scripts and the Functions library loaded), then
# `weir enqueue` of JOBS jobs and `weir work --drain`, instructions counted from just
# before to just after (callgrind_control -z / -d), less each server's idle instructions
# over the same time (read over 5 s, scaled). The cluster's queue has 6 partitions.
# Needs valgrind (Debian: valgrind) and a release build of weir.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000000}
weir=${WEIR_BIN:-target/release/weir}
rs=${REDIS_SERVER:-redis-server}
[ -x "$weir" ] || cargo build --release --quiet --bin weir
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
# A free port at most 55535: a cluster node's bus listens 10,000 higher.
free_port() {
  python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p <= 55535: print(p); break'
}

start() { # name, extra args...: starts a redis-server under callgrind, prints its port
  local name=$1 port; shift
  port=$(free_port)
  mkdir -p "$dir/$name"
  valgrind --tool=callgrind --callgrind-out-file="$dir/$name/cg.out" "$rs" --port "$port" \
    --save '' --appendonly no --dir "$dir/$name" "$@" >"$dir/$name/log" 2>&1 &
  pids+=($!)
  echo "$port" >"$dir/$name/port"
  echo "$!" >"$dir/$name/pid"
}
port() { cat "$dir/$1/port"; }
wait_up() { until redis-cli -p "$(port "$1")" ping >/dev/null 2>&1; do sleep 0.2; done; }

start single
for n in c1 c2 c3; do start "$n" --cluster-enabled yes --cluster-config-file "$dir/$n/nodes.conf" --cluster-node-timeout 15000; done
for n in single c1 c2 c3; do wait_up "$n"; done
redis-cli --cluster create "127.0.0.1:$(port c1)" "127.0.0.1:$(port c2)" "127.0.0.1:$(port c3)" \
  --cluster-replicas 0 --cluster-yes >/dev/null
until redis-cli -p "$(port c1)" cluster info | grep -q cluster_state:ok; do sleep 0.5; done
sleep 2
single_url="redis://127.0.0.1:$(port single)"
cluster_url="redis://127.0.0.1:$(port c1)"
"$weir" queue create -q part --partitions 6 --redis-url "$cluster_url" | tail -1

python3 - "$jobs" >"$dir/jobs.ndjson" <<'EOF'
import sys
pad = "x" * 90
for i in range(int(sys.argv[1])):
    sys.stdout.write('{"kind":"k","payload":{"p":"%s","n":%d}}\n' % (pad, i))
EOF
head -2000 "$dir/jobs.ndjson" >"$dir/warm.ndjson"
load_and_drain() { # url queue file
  "$weir" enqueue "$3" -q "$2" --redis-url "$1" >/dev/null 2>&1
  "$weir" work -q "$2" --redis-url "$1" --handler noop --drain --no-metrics >/dev/null 2>&1
}
load_and_drain "$single_url" single "$dir/warm.ndjson"
load_and_drain "$cluster_url" part "$dir/warm.ndjson"

instructions() { # name: instructions in the newest dump
  local f; f=$(ls -t "$dir/$1"/cg.out.* | head -1); awk '/^summary:/ {print $2}' "$f"
}
counted() { # command, then the servers: instructions they executed while it ran, less idle
  local what=$1; shift
  for n in "$@"; do callgrind_control -z "$(cat "$dir/$n/pid")" >/dev/null 2>&1; done
  local t0 t1; t0=$(date +%s.%N); $what; t1=$(date +%s.%N)
  for n in "$@"; do callgrind_control -d "$(cat "$dir/$n/pid")" >/dev/null 2>&1; done
  sleep 1
  local busy=0; for n in "$@"; do busy=$((busy + $(instructions "$n"))); done
  for n in "$@"; do callgrind_control -z "$(cat "$dir/$n/pid")" >/dev/null 2>&1; done
  sleep 5
  for n in "$@"; do callgrind_control -d "$(cat "$dir/$n/pid")" >/dev/null 2>&1; done
  sleep 1
  local idle=0; for n in "$@"; do idle=$((idle + $(instructions "$n"))); done
  python3 -c "print(round($busy - $idle * ($t1 - $t0) / 5))"
}
run_single() { load_and_drain "$single_url" single "$dir/jobs.ndjson"; }
run_cluster() { load_and_drain "$cluster_url" part "$dir/jobs.ndjson"; }
s=$(counted run_single single)
c=$(counted run_cluster c1 c2 c3)
python3 - "$jobs" "$s" "$c" <<'EOF'
import sys
jobs, s, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"instructions per job (enqueue + drain): single {s / jobs:,.0f}, "
      f"3-primary cluster with 6 partitions {c / jobs:,.0f} ({c / s:.3f}x)")
EOF
