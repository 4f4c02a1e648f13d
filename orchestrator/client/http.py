"""``OrchestratorClient``: one method per route of the HTTP API."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypedDict, Unpack

import aiohttp
import orjson

from orchestrator.client.models import (
    BatchItem,
    CancelResult,
    Event,
    EventPage,
    Group,
    OrchestratorApiError,
    Tracking,
    TrackingPage,
    error_for,
)
from orchestrator.vocabulary import Kind, Outcome, TrackingState

MAX_WAIT_S = 60.0  # the service's bound on ?wait=


class OrchestratorClient:
    """Calls one orchestrator; pass ``session`` to share a connection pool (it is not closed)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        session: aiohttp.ClientSession | None = None,
        *,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = session
        self._owns_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)

    async def __aenter__(self) -> OrchestratorClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Created on first use, inside the running loop, never at import.
            self._session = aiohttp.ClientSession(trust_env=False)
        return self._session

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    ) -> Any:
        data = None if json is None else orjson.dumps(json)
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        async with self.session.request(
            method,
            self.base_url + path,
            data=data,
            params=params,
            headers=headers,
            timeout=self._timeout,
        ) as resp:
            return await _answer(resp)

    # -- intake --

    async def track(
        self, kind: Kind | str, remote_id: str | None = None, **fields: Unpack[IntakeFields]
    ) -> Tracking:
        """Track one id (or the id inside Moltaro's raw enqueue answer); idempotent.

        Work found by filter (kinds ``trigger_work``, ``action_work``) takes no id
        but its filter: ``trigger_binding_id`` ... ``expect_jobs`` (CONTRACT section 8).
        """
        body = intake_body(kind, remote_id, **fields)
        return Tracking.from_json(await self._call("POST", "/v1/trackings", json=body))

    async def track_batch(
        self,
        items: builtins.list[Mapping[str, Any]],
        *,
        group: str | None = None,
        seal: bool = False,
    ) -> builtins.list[BatchItem]:
        """Up to 1,000 intake bodies (see ``intake_body``) in one transaction; ``group``:
        of every item that names none, sealed with the batch when ``seal``."""
        body: dict[str, Any] = {"items": list(items)}
        if group is not None:
            body.update(group=group, seal=seal)
        answer = await self._call("POST", "/v1/trackings/batch", json=body)
        return [
            BatchItem(
                status=int(item["status"]),
                tracking=Tracking.from_json(item["tracking"]) if item.get("tracking") else None,
                problem=item.get("problem"),
            )
            for item in answer["items"]
        ]

    async def track_follow_ups(
        self,
        runtime_result: Mapping[str, Any],
        workspace: str = "default",
        *,
        group: str | None = None,
        seal: bool | None = None,
    ) -> builtins.list[Tracking]:
        """Track every job id in a MoltaroRuntimeResult's FollowUpOperationIds (maybe none),
        in a group of their own (each tracking's ``group``), or in ``group`` (sealed with
        them when ``seal``)."""
        body: dict[str, Any] = {"workspace": workspace, "runtime_result": dict(runtime_result)}
        body.update({k: v for k, v in (("group", group), ("seal", seal)) if v is not None})
        answer = await self._call("POST", "/v1/trackings/follow-ups", json=body)
        return [Tracking.from_json(t) for t in answer["items"]]

    # -- queries --

    async def get(self, tracking_id: str) -> Tracking:
        return Tracking.from_json(await self._call("GET", f"/v1/trackings/{tracking_id}"))

    async def list_page(
        self, *, limit: int = 100, cursor: str | None = None, **filters: Unpack[ListFilters]
    ) -> TrackingPage:
        """One page, newest first; pass ``next_cursor`` back for the next one."""
        given = _known(ListFilters, filters)
        labels = given.pop("labels", None) or {}
        params = [("limit", str(limit))] + [(k, str(v)) for k, v in given.items()]
        params += [("cursor", cursor)] if cursor is not None else []
        params += [("label", f"{k}:{v}") for k, v in labels.items()]
        answer = await self._call("GET", "/v1/trackings", params=params)
        return TrackingPage(
            [Tracking.from_json(t) for t in answer["items"]], answer.get("next_cursor")
        )

    async def list(
        self, *, page_size: int = 500, **filters: Unpack[ListFilters]
    ) -> AsyncIterator[Tracking]:
        """Every matching tracking, newest first, fetched page by page."""
        cursor: str | None = None
        while True:
            page = await self.list_page(limit=page_size, cursor=cursor, **filters)
            for tracking in page.items:
                yield tracking
            cursor = page.next_cursor
            if cursor is None:
                return

    async def get_waiting(self, tracking_id: str, wait_s: float) -> Tracking:
        """The tracking once it has ended, or after ``wait_s`` (at most 60) as it is then."""
        path = f"/v1/trackings/{tracking_id}"
        return Tracking.from_json(await self._call("GET", path, params={"wait": f"{wait_s:.3f}"}))

    async def wait(
        self,
        tracking_id: str,
        *,
        poll_s: float = 0.5,
        timeout_s: float | None = None,
        on_change: Callable[[Tracking], Awaitable[None] | None] | None = None,
    ) -> Tracking:
        """Until the tracking is terminal, by the server-side wait: the end is seen as it
        is written. ``on_change`` sees each new state, remote status, next-read reason or
        kind of transport error, read at least every ``poll_s`` while it is given.

        Raises ``TimeoutError`` after ``timeout_s`` (the tracking goes on).
        """
        loop = asyncio.get_running_loop()
        until = None if timeout_s is None else loop.time() + timeout_s
        # Each wait ends well inside this client's own request timeout.
        longest = max(0.1, min(MAX_WAIT_S, (self._timeout.total or MAX_WAIT_S) - 5))
        server_waits = True
        async with asyncio.timeout(timeout_s):
            seen: tuple[object, ...] | None = None
            tracking = await self.get(tracking_id)
            while True:
                error = (tracking.last_error or {}).get("kind")
                now = (tracking.state, tracking.remote_status, tracking.next_poll_reason, error)
                if now != seen and on_change is not None:
                    maybe = on_change(tracking)
                    if maybe is not None:
                        await maybe
                seen = now
                if tracking.terminal:
                    return tracking
                wait_s = poll_s if on_change is not None else longest
                if until is not None:
                    wait_s = min(wait_s, max(0.1, until - loop.time()))
                if server_waits:
                    try:
                        tracking = await self.get_waiting(tracking_id, wait_s)
                        continue
                    except OrchestratorApiError as exc:
                        if exc.status != 422 or exc.field != "wait":
                            raise
                        server_waits = False  # a service from before ?wait=: read on a timer
                await asyncio.sleep(poll_s)
                tracking = await self.get(tracking_id)

    # -- groups --

    async def group(self, group: str, *, wait_s: float | None = None) -> Group:
        """The group; with ``wait_s`` (at most 60) once it has ended, or after that."""
        params = None if wait_s is None else {"wait": f"{wait_s:.3f}"}
        return Group.from_json(await self._call("GET", f"/v1/groups/{group}", params=params))

    async def seal_group(self, group: str, *, timeout_s: float | None = None) -> Group:
        """No more members (idempotent); ``timeout_s``: the group's deadline from now."""
        body = {} if timeout_s is None else {"timeout_s": timeout_s}
        return Group.from_json(await self._call("POST", f"/v1/groups/{group}/seal", json=body))

    async def wait_group(
        self,
        group: str,
        *,
        timeout_s: float | None = None,
        progress_s: float | None = None,
        on_change: Callable[[Group], Awaitable[None] | None] | None = None,
    ) -> Group:
        """Until the group has ended (completed or deadline_exceeded), by the server-side
        wait; ``on_change`` sees it at least every ``progress_s`` (default: only at the end
        and each longest wait). Raises ``TimeoutError`` after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        until = None if timeout_s is None else loop.time() + timeout_s
        longest = max(0.1, min(MAX_WAIT_S, (self._timeout.total or MAX_WAIT_S) - 5))
        async with asyncio.timeout(timeout_s):
            found = await self.group(group)
            while True:
                if on_change is not None:
                    maybe = on_change(found)
                    if maybe is not None:
                        await maybe
                if found.ended:
                    return found
                wait_s = longest if progress_s is None else min(progress_s, longest)
                if until is not None:
                    wait_s = min(wait_s, max(0.1, until - loop.time()))
                found = await self.group(group, wait_s=wait_s)

    # -- caller actions --

    async def cancel(self, tracking_id: str) -> CancelResult:
        """Ask Moltaro to cancel (function jobs while ``CanCancel``); ``Conflict`` otherwise."""
        answer = await self._call("POST", f"/v1/trackings/{tracking_id}/cancel")
        return CancelResult(answer["tracking_id"], answer.get("remote_status"), answer["detail"])

    async def abandon(self, tracking_id: str) -> Tracking:
        """Stop tracking (outcome ``abandoned``); the remote work is left alone."""
        return Tracking.from_json(await self._call("DELETE", f"/v1/trackings/{tracking_id}"))

    # -- events --

    async def events(self, after: int = 0, limit: int = 100) -> EventPage:
        answer = await self._call(
            "GET", "/v1/events", params={"after": str(after), "limit": str(limit)}
        )
        return EventPage([Event.from_json(e) for e in answer["events"]], int(answer["next_after"]))

    async def stream_events(self, after: int = 0) -> AsyncIterator[Event]:
        """Server-sent events from ``after`` on, reconnecting where it left off until cancelled."""
        cursor = after
        while True:
            headers = {**self._headers, "Accept": "text/event-stream"}
            if cursor:
                headers["Last-Event-ID"] = str(cursor)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
            async with self.session.get(
                self.base_url + "/v1/events/stream",
                params={"after": str(cursor)},
                headers=headers,
                timeout=timeout,
            ) as resp:
                if resp.status >= 400:
                    await _answer(resp)  # raises
                data: list[bytes] = []
                async for line in resp.content:
                    line = line.rstrip(b"\r\n")
                    if line.startswith(b"data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        event = Event.from_json(orjson.loads(b"\n".join(data)))
                        data = []
                        cursor = event.seq
                        yield event
            # The server ends the stream when it drains: reconnect after a breath.
            await asyncio.sleep(1.0)

    async def metrics(self) -> str:
        """The Prometheus exposition text of ``/metrics``."""
        async with self.session.get(self.base_url + "/metrics", timeout=self._timeout) as resp:
            if resp.status >= 400:
                raise error_for(resp.status, None, resp.headers)
            return await resp.text()

    async def ready(self) -> bool:
        """True when ``/readyz`` says the service takes work."""
        try:
            async with self.session.get(self.base_url + "/readyz", timeout=self._timeout) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False


async def _answer(resp: aiohttp.ClientResponse) -> Any:
    """The answer's JSON; a problem is raised as its typed error."""
    raw = await resp.read()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = {"detail": raw[:200].decode(errors="replace")}
    if resp.status >= 400:
        raise error_for(resp.status, body if isinstance(body, dict) else None, resp.headers)
    return body


class IntakeFields(TypedDict, total=False):
    """The intake fields after ``kind`` and ``remote_id`` (CONTRACT section 3); those
    from ``trigger_binding_id`` on are the filter of ``trigger_work`` and ``action_work``."""

    enqueue_response: Mapping[str, Any] | None
    workspace: str
    timeout_s: float | None
    deadline_at: str | datetime | None
    labels: Mapping[str, str] | None
    correlation_id: str | None
    callback_url: str | None
    notify: Literal["terminal", "all"]
    group: str | None
    group_expect: int | None
    trigger_binding_id: str | None
    entity_id: str | None
    filter_correlation_id: str | None
    action_id: str | None
    job_id: str | None
    since: str | datetime | None
    expect_jobs: int | None


class ListFilters(TypedDict, total=False):
    state: TrackingState | str | None
    kind: Kind | str | None
    outcome: Outcome | str | None
    workspace: str | None
    labels: Mapping[str, str] | None


# The intake fields of work found by filter (CONTRACT section 8).
_INTAKE_FIELDS = tuple(IntakeFields.__annotations__)
FILTER_FIELDS = _INTAKE_FIELDS[_INTAKE_FIELDS.index("trigger_binding_id") :]


def _known(fields: type[Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` without its None values; a keyword ``fields`` does not name is a TypeError."""
    unknown = set(given) - set(fields.__annotations__)
    if unknown:
        raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
    return {k: v for k, v in given.items() if v is not None}


def intake_body(
    kind: Kind | str, remote_id: str | None = None, **fields: Unpack[IntakeFields]
) -> dict[str, Any]:
    """One intake body as ``POST /v1/trackings`` and each batch item take it; None
    values are left out."""
    body: dict[str, Any] = {"kind": kind, "workspace": "default", "notify": "terminal"}
    body.update({"remote_id": remote_id} if remote_id is not None else {})
    for name, value in _known(IntakeFields, fields).items():
        if isinstance(value, datetime):
            value = value.isoformat()
        body[name] = dict(value) if isinstance(value, Mapping) else value
    return body
