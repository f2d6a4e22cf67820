#!/usr/bin/env bash
# Two fleet-scale checks of `weir work`, each on a private redis-server:
#
#   bash scripts/idle-and-long-jobs.sh idle [SECONDS]   # default 30
#       the commands an idle `weir work` (metrics on) sends Redis in SECONDS, after 3 s
#       of start-up, counted by `redis-cli monitor` (a script call is one command);
#   bash scripts/idle-and-long-jobs.sh long [DURATION] [EXTRA...]   # default 6s
#       40 jobs of DURATION, two `weir work --concurrency 20 --drain` started together:
#       the wall time until both exit and what each ran (the ideal is one DURATION);
#       EXTRA goes to both (`--prefetch 40` holds two jobs per slot, as weir did before).
#
# WEIR=path/to/weir (default target/release/weir, else target/debug/weir).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WEIR:-target/release/weir}
[ -x "$W" ] || W=target/debug/weir
source scripts/private-redis.sh
case "${1:-idle}" in
  idle)
    WIN=${2:-30}
    echo '{"kind":"k","payload":1}' | "$W" enqueue --create -q idle --redis-url "$U" >/dev/null
    "$W" work -q idle --redis-url "$U" --handler noop --metrics-addr "127.0.0.1:$(port)" >"$D/w.out" 2>"$D/w.err" &
    P=$!
    sleep 3
    timeout "$WIN" redis-cli -p "$PORT" monitor >"$D/mon" || true
    kill "$P"; wait "$P" || true
    # `<time> [<db> <client>] "<command>" ...`; commands scripts run inside Redis: `[0 lua]`
    grep -v '^OK$' "$D/mon" | grep -v ' lua\]' | awk -F'"' '{print tolower($2)}' | sort | uniq -c
    echo "an idle weir work: $(grep -v '^OK$' "$D/mon" | grep -vc ' lua\]') commands in $WIN s"
    ;;
  long)
    DUR=${2:-6s}
    shift $(( $# > 1 ? 2 : 1 ))
    for i in $(seq 1 40); do echo "{\"kind\":\"k\",\"payload\":$i}"; done |
      "$W" enqueue --create -q long --redis-url "$U" >/dev/null
    t0=$(date +%s.%N)
    for c in a b; do
      "$W" work -q long --redis-url "$U" --handler "sleep:$DUR" --concurrency 20 --drain --no-metrics "$@" \
        >"$D/$c.out" 2>"$D/$c.err" &
    done
    wait
    t1=$(date +%s.%N)
    echo "40 jobs of $DUR, two consumers of 20 slots: $(echo "$t1 - $t0" | bc) s"
    for c in a b; do echo "  $c: $(cat "$D/$c.out" "$D/$c.err" | grep -i 'acked' | tail -n 1)"; done
    ;;
  *) echo "usage: $0 idle [SECONDS] | long [DURATION] [EXTRA...]" >&2; exit 2 ;;
esac
