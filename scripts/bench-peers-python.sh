#!/usr/bin/env bash
# weir's Python worker, the Node worker on the exec protocol and the HTTP handler beside the
# peer queues (RQ, arq, Celery, BullMQ), in one sitting: ../shared/peers/run.sh measures the
# peers and the Python worker with async handlers against one private redis-server, then runs
# again, once per other candidate, against a fresh redis-server started the same way; the
# table of ratios comes from all of them.
#
#   cargo build --release --bin weir
#   python3 -m venv target/bench-venv && target/bench-venv/bin/pip install ./clients/python
#   bash scripts/bench-peers-python.sh            # about 15-25 minutes on 2 cores
#
# Env: PEERS_DIR (../shared/peers), PEERS_WORK (where run.sh copies itself and installs its venv
# and BullMQ: /tmp/weir-peers), REPS (2), WEIR_PYTHON (target/bench-venv/bin/python),
# CANDIDATES ("py-async py-sync node http cli-noop"; the first runs beside the peers),
# QUIET_WAIT_S (30: how long run.sh waits for a quiet machine before each measurement),
# MAX_TOTAL_S (3600: run.sh starts no measurement after this many seconds).
# Output: each run.sh run's results/<stamp>/ under PEERS_WORK, and the table (also in
# PEERS_WORK/results/weir-<stamp>.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PEERS_DIR:-}" ]; then  # ../shared/peers beside the checkout (a worktree: one up)
  for d in "$ROOT/../shared/peers" "$ROOT/../../shared/peers"; do
    [ -f "$d/run.sh" ] && PEERS_DIR=$(cd "$d" && pwd) && break
  done
fi
PEERS_DIR=${PEERS_DIR:-$ROOT/../shared/peers}
WORK=${PEERS_WORK:-/tmp/weir-peers}
REPS=${REPS:-2}
PY=${WEIR_PYTHON:-$ROOT/target/bench-venv/bin/python}
CANDIDATES=${CANDIDATES:-"py-async py-sync node http cli-noop"}
WEIR_BIN=$ROOT/target/release/weir
export QUIET_WAIT_S=${QUIET_WAIT_S:-30} MAX_TOTAL_S=${MAX_TOTAL_S:-3600}

[ -x "$WEIR_BIN" ] || { echo "build it first: cargo build --release --bin weir" >&2; exit 1; }
"$PY" -c 'import weir' 2>/dev/null || {
  echo "install the Python package first (a release build):" >&2
  echo "  python3 -m venv target/bench-venv && target/bench-venv/bin/pip install ./clients/python" >&2
  exit 1
}
[ -f "$PEERS_DIR/run.sh" ] || { echo "no peers harness at $PEERS_DIR (set PEERS_DIR)" >&2; exit 1; }
[ -d "$ROOT/clients/node/node_modules" ] || (cd "$ROOT/clients/node" && npm ci --silent --no-audit --no-fund)

# run.sh's installs, without the apalis build it would also do (apalis is not measured here).
mkdir -p "$WORK"
cp -r "$PEERS_DIR"/. "$WORK"/
if ! "$WORK/.venv/bin/python" -c 'import rq, arq, celery, gevent, redis' 2>/dev/null; then
  echo "installing the peers' Python packages into $WORK/.venv" >&2
  python3 -m venv "$WORK/.venv" && "$WORK/.venv/bin/pip" install -q -r "$WORK/requirements.txt"
fi
if [ ! -d "$WORK/node/node_modules/bullmq" ]; then
  echo "installing BullMQ into $WORK/node" >&2
  (cd "$WORK/node" && npm ci --no-audit --no-fund)
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
table=$WORK/results/weir-$stamp.md
mkdir -p "$WORK/results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
dirs=()
first=1
for cand in $CANDIDATES; do
  if [ "$first" = 1 ]; then peers="rq arq celery bullmq"; else peers=none; fi
  first=0
  before=$(ls "$WORK/results")
  echo "== run.sh: peers '$peers', candidate weir-$cand ==" >&2
  PEERS="$peers" REPS="$REPS" EXTRAS=0 CEILINGS=0 SKIP_INSTALL=1 PEERS_WORK="$WORK" \
    CANDIDATE_LABEL="weir-$cand" \
    CANDIDATE_CMD="WEIR_CANDIDATE=$cand WEIR_BIN=$WEIR_BIN WEIR_ROOT=$ROOT WEIR_PYTHON=$PY python3 $ROOT/scripts/bench_peers_candidate.py" \
    bash "$WORK/run.sh" >/dev/null
  # S2's floor with no queue at all: 100 tasks (asyncio) / 100 threads sleeping 10 ms, 200
  # times each, in the same sitting.
  "$PY" - >>"$WORK/results/weir-$stamp.ref" <<'REF'
import asyncio, threading, time
async def slot():
    for _ in range(200):
        await asyncio.sleep(0.01)
async def tasks():
    await asyncio.gather(*(slot() for _ in range(100)))
def thread():
    for _ in range(200):
        time.sleep(0.01)
t = time.perf_counter(); asyncio.run(tasks()); a = 20000 / (time.perf_counter() - t)
ts = [threading.Thread(target=thread) for _ in range(100)]
t = time.perf_counter(); [x.start() for x in ts]; [x.join() for x in ts]
b = 20000 / (time.perf_counter() - t)
print("REF asyncio_jobs_per_s=%.1f threads_jobs_per_s=%.1f" % (a, b))
REF
  new=$(comm -13 <(echo "$before") <(ls "$WORK/results") | grep -v '^weir-' | tail -1)
  dirs+=("$WORK/results/$new")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$table" "$load_before" "$load_after" "$WORK/results/weir-$stamp.ref" "${dirs[@]}" <<'PY'
import glob, os, statistics, sys

table, load_before, load_after, ref, dirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]

def kv(line):
    return dict(t.split("=", 1) for t in line.split()[1:] if "=" in t)

rows, cpu = [], {}
for d in dirs:
    with open(os.path.join(d, "raw.txt")) as f:
        here = [kv(l) for l in f if l.startswith("RESULT ")]
    rows += here
    # each run.sh run measures one candidate; its output per scenario is in logs/
    lab = next(r["label"] for r in here if r.get("peer") == "candidate")
    for log in glob.glob(os.path.join(d, "logs", "candidate-*.log")):
        scen = os.path.basename(log)[len("candidate-"):-len(".log")]
        with open(log) as f:
            cpu.setdefault((lab, scen), []).extend(
                float(kv(l)["cpu_us_per_job"]) for l in f
                if l.startswith("RESULT ") and "cpu_us_per_job" in l)

def med(peer, label, scen):
    v = [float(r["drain_jobs_per_s"]) for r in rows if r.get("peer") == peer
         and (label is None or r.get("label") == label) and r.get("scenario") == scen
         and r.get("status") == "ok"]
    return statistics.median(v) if v else None

def fmt(x, spec=",.0f"):
    return "—" if x is None else format(x, spec)

peers = [(p, med(p, None, "s1"), med(p, None, "s2")) for p in ("arq", "celery", "rq", "bullmq")]
p1 = {p: s1 for p, s1, _ in peers}
out = []
out.append("| peer | S1 drain jobs/s | S2 jobs/s |")
out.append("|---|---:|---:|")
for p, s1, s2 in peers:
    out.append("| %s | %s | %s |" % (p, fmt(s1), fmt(s2)))
out.append("")
out.append("| weir | S1 drain jobs/s | x arq | x Celery | x RQ | x BullMQ | S2 jobs/s | of ideal (10,000/s) "
           "| CPU µs/job S1 | CPU µs/job S2 |")
out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
labels = []
for r in rows:
    if r.get("peer") == "candidate" and r["label"] not in labels:
        labels.append(r["label"])
ratio = lambda a, b: None if a is None or not b else a / b
for lab in labels:
    s1, s2 = med("candidate", lab, "s1"), med("candidate", lab, "s2")
    c1 = cpu.get((lab, "s1")); c2 = cpu.get((lab, "s2"))
    out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        lab, fmt(s1), fmt(ratio(s1, p1["arq"]), ".1f"), fmt(ratio(s1, p1["celery"]), ".1f"),
        fmt(ratio(s1, p1["rq"]), ".1f"), fmt(ratio(s1, p1["bullmq"]), ".1f"), fmt(s2),
        fmt(None if s2 is None else s2 / 10000, ".0%"),
        fmt(statistics.median(c1) if c1 else None, ".1f"),
        fmt(statistics.median(c2) if c2 else None, ".1f")))
refs = [kv(l) for l in open(ref) if l.startswith("REF ")]
ra = statistics.median(float(r["asyncio_jobs_per_s"]) for r in refs)
rt = statistics.median(float(r["threads_jobs_per_s"]) for r in refs)
out.append("")
out.append("S2 with no queue at all (100 asyncio tasks / 100 threads sleeping 10 ms 200 times; "
           "median of %d, one after each run.sh run): asyncio %s jobs/s (%s of ideal), threads %s (%s)."
           % (len(refs), fmt(ra), fmt(ra / 10000, ".0%"), fmt(rt), fmt(rt / 10000, ".0%")))
out.append("")
def n_of(peer, scen):
    return ", ".join(sorted({"{:,}".format(int(r["n"])) for r in rows
                             if r.get("peer") == peer and r.get("scenario") == scen}))
out.append("Medians of each run.sh's repetitions. Jobs per run, S1: weir %s, BullMQ %s, arq %s, "
           "Celery %s, RQ %s; S2 (10 ms each, concurrency 100): weir %s, RQ %s (on 2 sequential "
           "workers: its ideal is 200/s). CPU µs/job: the worker's processes (engine, handlers, "
           "exec children) over the drain."
           % (n_of("candidate", "s1"), n_of("bullmq", "s1"), n_of("arq", "s1"),
              n_of("celery", "s1"), n_of("rq", "s1"), n_of("candidate", "s2"), n_of("rq", "s2")))
out.append("Load average before %s, after %s; %d cores. run.sh results: %s"
           % (load_before, load_after, os.cpu_count(), " ".join(dirs)))
text = "\n".join(out)
print(text)
with open(table, "w") as f:
    f.write(text + "\n")
PY
