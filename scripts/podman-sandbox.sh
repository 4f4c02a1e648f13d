#!/usr/bin/env bash
# A podman of its own in one directory, for CI and the container test: its
# configuration, image store, volumes, networks and run state all live in DIR,
# so nothing is cached outside it and `clean` leaves no trace.
#
#   scripts/podman-sandbox.sh setup DIR   write DIR/containers.conf and DIR/storage.conf
#   scripts/podman-sandbox.sh base DIR    make sure docker.io/library/python:3.11-slim is
#                                         in DIR's store: pulled, or else a stand-in
#   scripts/podman-sandbox.sh clean DIR   remove every pod, container, volume, secret,
#                                         network and image of DIR's store, then DIR
#
# Point podman at it with
#   CONTAINERS_CONF=DIR/containers.conf CONTAINERS_STORAGE_CONF=DIR/storage.conf
# (this script sets both itself for `base` and `clean`).
#
# The stand-in: when no registry serves python:3.11-slim (a machine that reaches
# Debian's mirror but no container registry), `base` builds one from Debian 12's
# packages with debootstrap (Python 3.11, pip, venv, ca-certificates, tzdata)
# and imports it under that name, so the Dockerfile builds unedited. Downloads
# inside a build go through this machine's network as they are: the stand-in
# trusts the extra CA certificates the host trusts (/usr/local/share/ca-certificates,
# e.g. a TLS-intercepting proxy's) and carries the host pip's certificate and
# timeout settings, and its index when that is a URL; podman build passes the
# host's HTTP(S)_PROXY variables on by itself.
set -euo pipefail

BASE=docker.io/library/python:3.11-slim
usage="usage: podman-sandbox.sh setup|base|clean DIR"
cmd="${1:?$usage}"
dir="$(realpath -m "${2:?$usage}")"
export CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf"

setup() {
    mkdir -p "$dir"
    # runc: crun refuses the cgroup mount of some sandboxes. cgroupfs and a file
    # event log: no systemd is needed (without it, podman's health-check timers
    # do not run: `podman healthcheck run` runs a check by hand). Explicit
    # ulimits: the runtime's defaults can exceed what a sandbox allows.
    cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$dir/events.log"
tmp_dir = "$dir/libpod"

[network]
network_backend = "netavark"
network_config_dir = "$dir/networks"
EOF
    cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$dir/storage"
runroot = "$dir/run"
EOF
}

pip_setting() {  # the host pip's value of global.KEY, if any
    python3 -m pip config get "global.$1" 2>/dev/null || true
}

standin() {
    local work="$dir/standin" rootfs="$dir/standin/rootfs"
    mkdir -p "$work/debs"
    echo "podman-sandbox: no registry serves $BASE; building a stand-in from Debian 12's packages" >&2
    debootstrap --variant=minbase --cache-dir="$work/debs" \
        --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,netbase,tzdata \
        bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 ||
        { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
    # Trim what a slim image leaves out.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*
    # The host's extra CA certificates, so that TLS through this network verifies.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    {
        echo "[global]"
        echo "cert = /etc/ssl/certs/ca-certificates.crt"
        local timeout index
        timeout="${PIP_DEFAULT_TIMEOUT:-$(pip_setting timeout)}"
        index="${PIP_INDEX_URL:-$(pip_setting index-url)}"
        if [ -n "$timeout" ]; then echo "timeout = $timeout"; fi
        case "$index" in http://* | https://*) echo "index-url = $index" ;; esac
    } >"$rootfs/etc/pip.conf"
    tar -C "$rootfs" -c . | podman import --quiet \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'LABEL org.opencontainers.image.description="stand-in for python:3.11-slim: Debian 12 python3 (scripts/podman-sandbox.sh)"' \
        --change 'CMD ["python3"]' - "$BASE" >/dev/null
    rm -rf "$work"
}

base() {
    [ -f "$CONTAINERS_CONF" ] || setup
    if podman image exists "$BASE"; then
        echo "podman-sandbox: $BASE present"
    elif timeout 120 podman pull -q "$BASE" >/dev/null 2>&1; then
        echo "podman-sandbox: $BASE pulled"
    else
        standin
        echo "podman-sandbox: $BASE is a stand-in built from Debian 12's packages"
    fi
}

clean() {
    [ -d "$dir" ] || return 0
    if [ -f "$CONTAINERS_CONF" ] && command -v podman >/dev/null; then
        podman pod rm -af -t 0 >/dev/null 2>&1 || true
        podman rm -af -t 0 >/dev/null 2>&1 || true
        podman volume rm -af >/dev/null 2>&1 || true
        podman secret ls -q 2>/dev/null | xargs -r podman secret rm >/dev/null 2>&1 || true
        podman network ls -q 2>/dev/null | grep -vx podman | xargs -r podman network rm -f \
            >/dev/null 2>&1 || true
        podman rmi -af >/dev/null 2>&1 || true
    fi
    # Whatever podman left mounted under DIR (overlay layers, the run state).
    grep -F " $dir/" /proc/self/mountinfo | awk '{print $5}' | sort -r |
        xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf "$dir"
}

case "$cmd" in
setup) setup ;;
base) base ;;
clean) clean ;;
*)
    echo "podman-sandbox: unknown command $cmd ($usage)" >&2
    exit 2
    ;;
esac
