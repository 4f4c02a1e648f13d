#!/usr/bin/env bash
# Installs Debian's podman and what the container test needs beside it, when
# any of it is missing, so tests/container can build the image and run it:
#   podman, buildah      build and run (rootful), `podman kube play` for the pod
#   runc                 the OCI runtime (crun refuses some sandboxes' cgroup mount)
#   netavark, aardvark-dns, iptables
#                        podman networks with name resolution, published ports
#                        (iptables also makes the packet loss of tests/chaos/links.py)
#   catatonit            the pause process of a pod's infra container
#   debootstrap          a stand-in python:3.11-slim base when no registry serves it
#                        (scripts/podman-sandbox.sh base)
# Idempotent: a second run only prints the version.
set -euo pipefail

needed=(podman buildah runc netavark aardvark-dns iptables catatonit debootstrap uidmap)
missing=()
for pkg in "${needed[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "podman already installed"
else
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-podman: need root to apt-get install ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Others may hold the dpkg lock on a shared machine: wait for it (bounded).
    apt_opts=(-o DPkg::Lock::Timeout=300)
    apt-get "${apt_opts[@]}" update -qq
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

podman --version
