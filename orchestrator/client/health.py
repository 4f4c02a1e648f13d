"""``orchestrator health``: is the service on this machine live (or ready)?

A probe for a container's HEALTHCHECK and a pod's exec probes: the address is
the service's own ``server.listen`` (its configuration, the environment
included; a wildcard host is asked on loopback), the answer is the exit code
(0: 200, 1: anything else, with one line saying what). Standard library only,
no proxy: a probe must not depend on more than the service it checks.
"""

from __future__ import annotations

import ipaddress
import urllib.error
import urllib.request

from orchestrator.config import Settings, split_listen


def local_url(settings: Settings, ready: bool) -> str:
    host, port = split_listen(settings.server.listen)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_unspecified:
        host = "127.0.0.1" if address.version == 4 else "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/{'readyz' if ready else 'healthz'}"


def probe(url: str, timeout_s: float) -> str | None:
    """None when ``url`` answers 200, else what went wrong."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as resp:
            return None if resp.status == 200 else f"{url} answered {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return f"{url}: {reason}"
