#!/usr/bin/env bash
# What Redis takes to store a bulk load's jobs, by the form of their envelopes: the
# evidence for a smaller envelope (issue 41, item 4). One private redis-server.
#
#   bash scripts/envelope-forms.sh [JOBS] [ROUNDS] [WEIR]   # defaults 1000000 5 target/release/weir
#
# The input is JOBS NDJSON lines `{"kind":"bench","payload":{...}}` of 100-byte payloads
# (as scripts/enqueue-vs-rpush.sh makes them). WEIR enqueues them once; the envelopes it
# stored are then rewritten into candidate forms, and each form is sent the way weir's bulk
# path sends it (MULTI, RPUSH of 1,000, HINCRBY, PUBLISH, SADD, EXEC), written ahead as
# RESP and piped by `redis-cli --pipe`, so the client costs nothing and the figures are
# Redis's alone:
#   full     the envelope as weir writes it today (protocol 1)
#   no-defaults   without attempt, max_attempts and priority (their defaults: 0, 5, normal)
#   short-time    also with enqueued_at as a one-letter field
#   id-kind       only id, kind and payload: {"id":"...","kind":"...","payload":...}
#   id-kind-timed the same with the enqueue time in the id: 8 base-36 digits of the
#                 epoch ms and a dot before weir's id (what carrying it there would cost)
#   lines    the NDJSON lines themselves, no id (raw RPUSH of the input)
# Each round sends every form in turn on an emptied server; the end prints each form's
# median rate, its ratio to the lines', and Redis's CPU per job (INFO cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-1000000}
ROUNDS=${2:-5}
WEIR=${3:-target/release/weir}
[ -x "$WEIR" ] || { echo "no weir binary at $WEIR (cargo build --release --bin weir)" >&2; exit 2; }
source scripts/private-redis.sh
R="redis-cli -p $PORT"

python3 - "$JOBS" "$D/jobs.ndjson" <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "wb") as f:
    for i in range(n):
        head = '{"n":%d,"to":"user%d@example.com","pad":"' % (i, i)
        payload = head + "x" * (100 - len(head) - 2) + '"}'
        f.write(('{"kind":"bench","payload":%s}\n' % payload).encode())
PY
"$WEIR" enqueue "$D/jobs.ndjson" -q bench --create --redis-url "redis://127.0.0.1:$PORT" >/dev/null
$R --raw lrange 'weir:{bench}:ready:normal' 0 -1 >"$D/envelopes"
python3 - "$D" <<'PY'
import re, sys
d = sys.argv[1]
full = open(d + "/envelopes", "rb").read().split(b"\n")[:-1]
lines = open(d + "/jobs.ndjson", "rb").read().split(b"\n")[:-1]
assert len(full) == len(lines), (len(full), len(lines))
head = re.compile(rb'^\{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":(\d+),')
def form(env, how):
    m = head.match(env)
    assert m, env[:80]
    rest = env[m.end():]
    if how == "no-defaults":
        return b'{"enqueued_at":' + m.group(1) + b"," + rest
    if how == "short-time":
        return b'{"t":' + m.group(1) + b"," + rest
    if how == "id-kind-timed":
        ms, digits = int(m.group(1)), b""
        while ms:
            ms, d = divmod(ms, 36)
            digits = b"0123456789abcdefghijklmnopqrstuvwxyz"[d:d + 1] + digits
        return b'{"id":"' + digits.rjust(8, b"0") + b"." + rest[len(b'"id":"'):]
    return b"{" + rest  # id-kind
forms = {"full": full, "lines": lines}
for how in ("no-defaults", "short-time", "id-kind", "id-kind-timed"):
    forms[how] = [form(e, how) for e in full]
def cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
for name, items in forms.items():
    with open(f"{d}/{name}.resp", "wb") as f:
        for at in range(0, len(items), 1000):
            chunk = items[at:at + 1000]
            f.write(cmd(b"MULTI") + cmd(b"RPUSH", b"forms:{bench}:ready", *chunk)
                    + cmd(b"HINCRBY", b"forms:{bench}:counters", b"enqueued", b"%d" % len(chunk))
                    + cmd(b"PUBLISH", b"forms:{bench}:wake", b"enqueue") + cmd(b"SADD", b"forms:queues", b"bench")
                    + cmd(b"EXEC"))
    print(f"{name}: {sum(map(len, items)) / len(items):.0f} bytes a job on average", file=sys.stderr)
PY

cpu() { $R info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}'; }
FORMS="full no-defaults short-time id-kind id-kind-timed lines"
: >"$D/results"
echo "$JOBS jobs, $ROUNDS rounds, redis $(redis-server --version | awk '{print $3}')"
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for name in $FORMS; do
    $R flushall >/dev/null
    c0=$(cpu)
    t0=$(date +%s.%N)
    redis-cli -p "$PORT" --pipe <"$D/$name.resp" >/dev/null
    t1=$(date +%s.%N)
    c1=$(cpu)
    stored=$($R llen 'forms:{bench}:ready')
    [ "$stored" -eq "$JOBS" ] || { echo "$name: stored $stored of $JOBS" >&2; exit 1; }
    read -r rate us < <(python3 -c "print(f'{$JOBS / ($t1 - $t0):.0f} {($c1 - $c0) / $JOBS * 1e6:.3f}')")
    echo "$name $rate $us" >>"$D/results"
    line+=" $name $rate/s"
  done
  echo "$line"
done
python3 - "$D/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda name, col: statistics.median(float(r[col]) for r in rows if r[0] == name)
lines = med("lines", 1)
for name in ("full", "no-defaults", "short-time", "id-kind", "id-kind-timed", "lines"):
    print(f"{name:13s} median {med(name, 1):>12,.0f} jobs/s = {med(name, 1) / lines:.2f}x the lines', Redis CPU {med(name, 2):.3f} µs per job")
PY
