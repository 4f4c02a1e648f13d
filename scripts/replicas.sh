#!/usr/bin/env bash
# Several `orchestrator serve` replicas on one PostgreSQL database, beside the
# bundled simulator, on loopback: a way to try the replica setup by hand.
#
#   scripts/replicas.sh [N] [DIR]    N replicas (default 3); state in DIR (default: a temp dir)
#
# Starts a throwaway cluster from Debian's packages (scripts/pg-cluster.sh), the
# simulator on a free port, and N replicas on free ports; prints their URLs and
# waits. Ctrl-C (or SIGTERM) stops the replicas, the simulator and PostgreSQL.
# With REPLICAS_ONCE=1 it stops by itself once every replica is ready (tests).
set -euo pipefail
cd "$(dirname "$0")/.."

n="${1:-3}"
dir="${2:-$(mktemp -d /tmp/orch-replicas.XXXXXX)}"
mkdir -p "$dir"
chmod 755 "$dir"
python="${PYTHON:-.venv/bin/python}"
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    bash scripts/pg-cluster.sh stop "$dir/pg" || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM

dsn="$(bash scripts/pg-cluster.sh start "$dir/pg")"
sim_port="$(free_port)"
"$python" -m orchestrator simulate --listen "127.0.0.1:$sim_port" --profile fast >"$dir/simulator.log" 2>&1 &
pids+=("$!")

urls=()
for i in $(seq 1 "$n"); do
    port="$(free_port)"
    cat >"$dir/replica-$i.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
allow_unauthenticated = true
replica_id = "replica-$i"

[store]
url = "$dsn"

[[workspaces]]
name = "default"
base_url = "http://127.0.0.1:$sim_port"
TOML
    "$python" -m orchestrator serve --config "$dir/replica-$i.toml" >"$dir/replica-$i.log" 2>&1 &
    pids+=("$!")
    urls+=("http://127.0.0.1:$port")
done

for url in "${urls[@]}"; do
    for _ in $(seq 1 300); do
        if "$python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/readyz', timeout=1)" "$url" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    "$python" -c "import sys, urllib.request; print(sys.argv[1], urllib.request.urlopen(sys.argv[1] + '/readyz', timeout=1).read().decode())" "$url"
done
echo "postgres:  $dsn"
echo "simulator: http://127.0.0.1:$sim_port"
echo "state and logs in $dir"
if [ "${REPLICAS_ONCE:-}" = "1" ]; then
    exit 0
fi
echo "Ctrl-C stops everything."
while true; do sleep 3600; done
