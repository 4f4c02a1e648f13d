"""Each destination's signing key, resolved once at start-up.

Never unsigned by accident: a sink whose secret variable is not named, not
set, empty, or not a ``whsec_`` secret stops start-up with a ConfigError (one
line naming the sink and the variable; the value itself never appears). A
sink sends unsigned only when its configuration says ``signing = "none"``,
and that is logged as a warning once at start. The callbacks follow the same
rule through ``events.callback_secret_env`` and ``events.callback_signing``,
but only once ``events.callback_allowlist`` lets a callback in: with an empty
allowlist no callback is ever sent, so no secret is needed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from orchestrator.config import EventsConfig, Signing
from orchestrator.errors import ConfigError
from orchestrator.events.attempt import secret_key
from orchestrator.events.cloudevents import CALLBACK, sink_destination

log = logging.getLogger(__name__)

_UNSIGNED_HINT = 'or set signing = "none" to send unsigned on purpose'


def signing_keys(
    events: EventsConfig, secrets: Mapping[str, str] | None = None
) -> dict[str, bytes | None]:
    """The HMAC key of every destination (None: unsigned on purpose), by destination key.

    ``secrets`` (by destination key) replaces the environment, for tests.
    """
    keys: dict[str, bytes | None] = {}
    for sink in events.sinks:
        dest = sink_destination(sink.name)
        where = f'events.sinks "{sink.name}"'
        keys[dest] = _key(secrets, dest, sink.secret_env, sink.signing, where, "secret_env")
    if events.callback_allowlist:
        keys[CALLBACK] = _key(
            secrets,
            CALLBACK,
            events.callback_secret_env,
            events.callback_signing,
            "callbacks",
            "events.callback_secret_env",
        )
    else:
        keys[CALLBACK] = None  # no callback can be accepted, so none is ever sent
    return keys


def _key(
    secrets: Mapping[str, str] | None,
    dest: str,
    env: str | None,
    signing: Signing,
    where: str,
    setting: str,
) -> bytes | None:
    if signing == "none":
        log.warning(
            "%s: signing is none, deliveries are sent unsigned; receivers cannot verify them",
            where,
        )
        return None
    if not env:
        raise ConfigError(
            f"{where}: {setting} is not set; name the variable holding its whsec_ secret, "
            + _UNSIGNED_HINT
        )
    raw = secrets.get(dest) if secrets is not None else os.environ.get(env)
    if not raw or not raw.strip():
        raise ConfigError(
            f"{where}: ${env} ({setting}) is unset or empty; set it to a whsec_ secret, "
            + _UNSIGNED_HINT
        )
    try:
        key = secret_key(raw.strip())
    except ValueError as exc:
        raise ConfigError(f"{where}: ${env} ({setting}): {exc}") from None
    if key is None:
        raise ConfigError(
            f"{where}: ${env} ({setting}) does not hold a whsec_ secret "
            "(whsec_ followed by a base64 key); " + _UNSIGNED_HINT
        )
    return key
