"""A small typed async client of the orchestrator's HTTP API (aiohttp).

    async with OrchestratorClient("http://127.0.0.1:8080", token="...") as orch:
        tracking = await orch.track("function_job", enqueue_response=body)
        final = await orch.wait(tracking.tracking_id)

Problems the API answers (RFC 9457 ``application/problem+json``) are raised as
typed errors; anything that never got an answer (refused connection, timeout)
is aiohttp's own ``aiohttp.ClientError`` or ``TimeoutError``::

    OrchestratorApiError        status, title, detail, field, body
    ├── InvalidRequest          400, 413, 415, 422: the request names a bad field
    ├── Unauthorized            401: missing or wrong bearer token
    ├── NotFound                404: no such tracking (or delivery)
    ├── Conflict                409: already terminal, not cancellable
    ├── Unavailable             503: draining or store full; retry (``retry_after``)
    └── ServerError             any other 5xx

``wait`` reads the tracking with ``GET /v1/trackings/{id}`` every ``poll_s``
seconds. It does not use the event stream: the log has no "from now on"
cursor (a stream from seq 0 replays every event ever kept), and only
``notify = "all"`` trackings get ``status_changed`` events, so polling one
indexed row is the cheaper and uniform way to see every status change.
"""

from __future__ import annotations

from orchestrator.client.http import OrchestratorClient, intake_body
from orchestrator.client.models import (
    TERMINAL_OUTCOMES,
    BatchItem,
    CancelResult,
    Conflict,
    Event,
    EventPage,
    Group,
    InvalidRequest,
    NotFound,
    OrchestratorApiError,
    ServerError,
    Tracking,
    TrackingPage,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "TERMINAL_OUTCOMES",
    "BatchItem",
    "CancelResult",
    "Conflict",
    "Event",
    "EventPage",
    "Group",
    "InvalidRequest",
    "NotFound",
    "OrchestratorApiError",
    "OrchestratorClient",
    "ServerError",
    "Tracking",
    "TrackingPage",
    "Unauthorized",
    "Unavailable",
    "intake_body",
]
