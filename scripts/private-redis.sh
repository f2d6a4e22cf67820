# Sourced by the measuring scripts: a private redis-server on a free loopback port, no
# persistence, stopped (by its PID) and its directory removed when the script exits.
# Sets D (a temporary directory, the server's), PORT and U (its URL).
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
D=$(mktemp -d)
PORT=$(port)
redis-server --port "$PORT" --save '' --appendonly no --dir "$D" --daemonize yes --pidfile "$D/r.pid" >/dev/null
trap 'kill "$(cat "$D/r.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$D"' EXIT
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.1; done
U=redis://127.0.0.1:$PORT
