#!/usr/bin/env bash
# Handler-call cost of the exec protocol (Node Worker, weir_exec.py) and the HTTP handler:
#   S1: 100,000 no-op jobs enqueued, then drained;
#   S2: 20,000 jobs that wait 10 ms, concurrency 100 (ideal 10,000 jobs/s).
# Uses a release `weir` (cargo build --release --bin weir) and a private redis-server on a
# free loopback port. Usage: scripts/bench-exec.sh [S1_JOBS] [S2_JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
S1=${1:-100000}
S2=${2:-20000}
weir=target/release/weir
[ -x "$weir" ] || { echo "build it first: cargo build --release --bin weir" >&2; exit 1; }
bash scripts/ensure-clients.sh
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --daemonize yes --pidfile "$tmp/redis.pid" >/dev/null
trap 'kill "$(cat "$tmp/redis.pid")" 2>/dev/null; [ -n "${http_pid:-}" ] && kill "$http_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export REDIS_URL=redis://127.0.0.1:$port
sleep 0.3

cat >"$tmp/w.js" <<JS
const { Worker } = require('$PWD/clients/node');
const w = new Worker({ concurrency: 1000 });
w.handle('noop', async () => {});
w.handle('sleep', () => new Promise((r) => setTimeout(r, 10)));
w.run();
JS
cat >"$tmp/w.py" <<PY
import asyncio, sys
sys.path.insert(0, "$PWD/clients/python")
from weir_exec import Worker
w = Worker(concurrency=1000)
@w.handle("noop")
async def noop(job): pass
@w.handle("sleep")
async def sleep(job): await asyncio.sleep(0.01)
w.run()
PY
cat >"$tmp/endpoint.py" <<'PY'
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        jobs = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if any(j["kind"] == "sleep" for j in jobs): time.sleep(0.01)
        body = b'{"outcomes":[' + b",".join(b'{"i":%d,"status":"ok"}' % i for i in range(len(jobs))) + b"]}"
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
hport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$tmp/endpoint.py" "$hport" & http_pid=$!
sleep 0.3

run() { # name kind jobs concurrency handler-args...
  local name=$1 kind=$2 n=$3 c=$4; shift 4
  local q="bench-$RANDOM"
  seq "$n" | sed 's/.*/{}/' | "$weir" enqueue -q "$q" --kind "$kind" >/dev/null
  local line
  line=$("$weir" work -q "$q" --drain --no-metrics -c "$c" "$@" 2>/dev/null | grep processed)
  local rate
  rate=$(echo "$line" | sed -E 's/.*\(([0-9]+) jobs\/s\).*/\1/')
  printf '%-28s %8s jobs  %8s jobs/s  %8.1f us/job   %s\n' "$name" "$n" "$rate" "$(echo "1000000/$rate" | bc -l)" "$line"
}
echo "scenario                        jobs       rate   wall cost per job"
run "S1 exec node"       noop  "$S1" 16  --handler "exec:exec node $tmp/w.js"
run "S1 exec weir_exec.py" noop "$S1" 16 --handler "exec:exec python3 $tmp/w.py"
run "S1 http batch"      noop  "$S1" 16  --handler "http://127.0.0.1:$hport/" --batch-http 100
run "S1 noop (in-process)" noop "$S1" 16 --handler noop
run "S2 exec node"       sleep "$S2" 100 --handler "exec:exec node $tmp/w.js" --exec-batch 1
run "S2 exec weir_exec.py" sleep "$S2" 100 --handler "exec:exec python3 $tmp/w.py" --exec-batch 1
run "S2 sleep:10ms (in-process)" sleep "$S2" 100 --handler sleep:10ms
