#!/usr/bin/env bash
# Installs Debian's postgresql package when its server binaries are missing, so
# the PostgreSQL store's tests (and scripts/replicas.sh) can run a real server.
# Idempotent: a second run only prints the version. The package's own cluster is
# never used: scripts/pg-cluster.sh starts a throwaway one in a temporary directory.
set -euo pipefail

find_bindir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

bindir="$(find_bindir || true)"
if [ -n "$bindir" ] && [ -x "$bindir/initdb" ] && [ -x "$bindir/pg_ctl" ]; then
    echo "postgresql already installed"
else
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-postgresql: need root to apt-get install postgresql" >&2
        exit 1
    fi
    # The maintainer scripts would create and start the package's own cluster;
    # forbid starting services for this install only, then restore the policy.
    policy=/usr/sbin/policy-rc.d
    backup=""
    if [ -e "$policy" ]; then
        backup="$(mktemp)"
        cp -p "$policy" "$backup"
    fi
    restore_policy() {
        if [ -n "$backup" ]; then mv -f "$backup" "$policy"; else rm -f "$policy"; fi
    }
    trap restore_policy EXIT
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"

    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    bindir="$(find_bindir)"
fi

"$bindir/postgres" --version
