#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for tests, CI and scripts/replicas.sh.
#
#   scripts/pg-cluster.sh start DIR [PORT]   initdb in DIR/data, start, print the DSN
#   scripts/pg-cluster.sh stop DIR           stop it (fast shutdown); DIR is left to the caller
#   scripts/pg-cluster.sh restart DIR        stop and start again, same port and data
#   scripts/pg-cluster.sh up DIR             start a stopped cluster again, same port and data
#
# initdb refuses to run as root, so under root (CI) the cluster belongs to the
# `postgres` user that Debian's package creates. Trust authentication on
# 127.0.0.1 only: the cluster never listens off loopback.
set -euo pipefail

bindir="${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)}"
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "pg-cluster: no PostgreSQL server binaries (run scripts/install-postgresql.sh)" >&2
    exit 2
fi

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd="${1:?usage: pg-cluster.sh start|stop|restart|up DIR [PORT]}"
dir="$(realpath -m "${2:?usage: pg-cluster.sh start|stop|restart|up DIR [PORT]}")"

start_server() {
    local port
    port="$(cat "$dir/port")"
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null
}

case "$cmd" in
start)
    port="${3:-}"
    if [ -z "$port" ]; then
        port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; fi
    as_owner "$bindir/initdb" -D "$dir/data" -U orchestrator --auth=trust -E UTF8 \
        --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    start_server
    echo "postgresql://orchestrator@127.0.0.1:$port/postgres"
    ;;
stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
    fi
    ;;
restart)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
    start_server
    ;;
up)
    start_server
    ;;
*)
    echo "pg-cluster: unknown command $cmd" >&2
    exit 2
    ;;
esac
