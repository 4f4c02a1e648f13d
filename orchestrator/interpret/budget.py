"""A function job's time budget, read from its status body: pure.

CONTRACT section 3: a job tracked without the caller's deadline gets one from
the job itself once a read shows it. ``TimeoutSeconds`` belongs to the job (a
null one means the workspace's runtime default); every attempt may take it,
and a retry waits ``RetryDelaySeconds`` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.interpret._read import as_int, as_mapping, as_number, get_ci

_MAX_ATTEMPTS = 1000  # beyond this the body is not believed (the cap applies anyway)


def job_budget(body: Any, default_timeout_s: float) -> float | None:
    """TimeoutSeconds x EffectiveMaxAttempts + RetryDelaySeconds x (attempts - 1).

    None when the body does not show the attempts (or, with retries, their
    delay): the tracking then keeps its default deadline rather than guess.
    """
    model = as_mapping(body)
    if model is not None and get_ci(model, "Status") is None:
        model = as_mapping(get_ci(model, "Data")) or model
    if not isinstance(model, Mapping):
        return None
    attempts = as_int(get_ci(model, "EffectiveMaxAttempts"))
    if attempts is None or not 1 <= attempts <= _MAX_ATTEMPTS:
        return None
    timeout = as_number(get_ci(model, "TimeoutSeconds"))
    if timeout is None or timeout <= 0:
        timeout = default_timeout_s
    delay = as_number(get_ci(model, "RetryDelaySeconds"))
    if delay is None or delay < 0:
        if attempts > 1:
            return None
        delay = 0
    return float(timeout * attempts + delay * (attempts - 1))
