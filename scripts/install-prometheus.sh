#!/usr/bin/env bash
# Installs Debian's prometheus package (prometheus + promtool) when either
# binary is missing, so tests/integration/test_prometheus.py can run a real
# Prometheus. Idempotent: a second run only prints the versions.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    echo "prometheus already installed"
else
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-prometheus: need root to apt-get install prometheus" >&2
        exit 1
    fi
    # The package's maintainer scripts try to start a service; we never rely
    # on it (the tests run their own instance), so forbid it for this install
    # only and put back whatever policy was there before.
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
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1
