"""One configured Moltaro workspace: its routes, its enums, and every request to it.

Each request passes the workspace's gate (in-flight slots, rate limit,
Retry-After) and goes out through the transport; the answer is classified the
same way whoever asked. Routes always resolve against the workspace's
configured base URL; nothing from input ever chooses a host. Every request
names the replica that sends it (``X-Orchestrator-Replica``), so that a
workspace's logs, and the simulator's, tell replicas apart.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Coroutine, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from orchestrator import tracing
from orchestrator.clock import Clock, parse_retry_after
from orchestrator.config import WorkspaceConfig
from orchestrator.errors import ConfigError, EnumResolutionError
from orchestrator.interpret import EnumMap, fallback_enums, resolve_enums
from orchestrator.interpret.filters import (
    ROUTES,
    FilterNames,
    fallback_filter_names,
    resolve_filter_names,
)
from orchestrator.transport import (
    Answer,
    AnswerTooLarge,
    HttpTransport,
    Transport,
    TransportError,
)
from orchestrator.vocabulary import STATUS_KINDS
from orchestrator.workspace.gate import WorkspaceGate
from orchestrator.workspace.readresult import ReadResult, answered, timed_out, trouble

log = logging.getLogger("orchestrator.workspace")

REPLICA_HEADER = "X-Orchestrator-Replica"


class WorkspaceClient:
    def __init__(
        self,
        cfg: WorkspaceConfig,
        transport: Transport,
        token: str | None,
        gate: WorkspaceGate,
        clock: Clock,
        replica: str | None = None,
    ) -> None:
        self.cfg = cfg
        self._clock = clock
        self.name = cfg.name
        self._transport = transport
        self.gate = gate
        self.token = token
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        if replica:
            self._headers[REPLICA_HEADER] = replica
        self._templates = {k.value: cfg.paths.route(k) for k in STATUS_KINDS}
        self.enums: dict[str, EnumMap] = {k.value: fallback_enums(k) for k in STATUS_KINDS}
        # The Function operations lists' filter names (documented ones until read).
        self.filters: FilterNames = fallback_filter_names("OpenAPI document not read yet")
        self._digest_keys: dict[str, bytes] = {}
        self._key_digests()

    def _key_digests(self) -> None:
        """Key each kind's body digests with its enum map: the same bytes read under
        other enums (a changed OpenAPI document, across restarts too) never match."""
        for kind, enum_map in self.enums.items():
            spelled = repr(sorted((path, sorted(m.items())) for path, m in enum_map.values.items()))
            self._digest_keys[kind] = hashlib.blake2b(spelled.encode(), digest_size=32).digest()

    def status_url(self, kind: str, remote_id: str) -> str:
        return self.cfg.base_url + self._templates[kind].replace("{id}", remote_id)

    def read(
        self, kind: str, remote_id: str, seen: bytes | None = None
    ) -> Coroutine[Any, Any, ReadResult]:
        """Read a status; a body whose digest is ``seen`` comes back ``unchanged``, unparsed.

        A plain function handing back ``_request``'s coroutine: one coroutine frame
        less for every resumption of every read.
        """
        return self._request(
            "GET", self.status_url(kind, remote_id), seen=seen, digest_key=self._digest_keys[kind]
        )

    async def cancel(self, remote_id: str) -> ReadResult:
        path = self.cfg.paths.function_job_cancel.replace("{id}", remote_id)
        return await self._request("POST", self.cfg.base_url + path)

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> ReadResult:
        """Any other route of the workspace (administrative reads, stop-retries).

        ``path`` is a configured route with its ids already substituted (ids are
        validated URL-safe); ``query`` values are percent-encoded here.
        """
        url = self.cfg.base_url + path
        if query:
            url += "?" + urlencode(query, quote_via=quote)
        body = None if json is None else orjson.dumps(json)
        return await self._request(method, url, body)

    async def _send_traced(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
    ) -> Answer:
        """The exchange under a CLIENT span, while a traced tracking is polled; the
        workspace gets the span's ``traceparent``."""
        with tracing.client_span(method, url, tracing.POLL_TRACE.get()) as span:
            own = None if span is None else tracing.context_of(span)
            if own is not None:
                headers = {**headers, "traceparent": own[0]}
            try:
                answer = await self._transport.send(method, url, headers, body, timeout_s)
            except Exception as exc:
                tracing.answered(span, None, type(exc).__name__)
                raise
            tracing.answered(span, answer.status)
            return answer

    async def _request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        *,
        seen: bytes | None = None,
        digest_key: bytes | None = None,
    ) -> ReadResult:
        headers = self._headers
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
        timeout_s = self.cfg.request_timeout_s
        gate, holder = self.gate, object()  # a slot is held per request, not per task
        epoch = gate.lease_epoch
        if not gate.enter_nowait(holder):
            await gate.enter(holder)
            if gate.lease_epoch != epoch:
                # This replica gave its leases up while the request waited: another may
                # read the same tracking now, so this read is not sent.
                gate.leave(holder)
                return trouble("connection", "leases given up while waiting", 0.0)
        mono = self._clock.monotonic
        started = mono()
        try:
            if tracing.tracer is None:
                answer = await self._transport.send(method, url, headers, body, timeout_s)
            else:
                answer = await self._send_traced(method, url, headers, body, timeout_s)
        except TimeoutError:
            gate.unanswered()
            return timed_out(timeout_s, mono() - started)
        except AnswerTooLarge as exc:
            gate.answered()
            return trouble("invalid_response", str(exc), mono() - started)
        except TransportError as exc:
            gate.unanswered()
            return trouble("connection", str(exc), mono() - started)
        finally:
            gate.leave(holder)
        gate.answered()
        header = answer.retry_after
        wait = None if header is None else parse_retry_after(header, self._clock.now())
        result = answered(answer.status, answer.body, wait, mono() - started, seen, digest_key)
        if result.retry_after:
            self.gate.block(result.retry_after)
        return result

    async def close(self) -> None:
        """End what is still being sent and free the connections."""
        await self._transport.close()

    async def load_enums(self) -> bool:
        """Resolve every kind's enums, and the list routes' filter names, from the
        installed OpenAPI document.

        Returns True when all enums came from the document. On any failure the
        documented fallback stays in force (visible in metrics and logs).
        """
        read = await self._request("GET", self.cfg.base_url + self.cfg.openapi_path)
        if read.result != "ok" or read.http_status != 200 or not isinstance(read.body, dict):
            reason = read.result if read.result != "ok" else f"HTTP {read.http_status}"
            log.warning(
                "OpenAPI document unreachable or unusable; using documented enum values "
                "and filter names",
                extra={"fields": {"workspace": self.name, "error": reason}},
            )
            if self.filters.fallback == frozenset(ROUTES):
                # Names once read are kept: a passing outage must not undo them.
                self.filters = fallback_filter_names(f"OpenAPI document: {reason}")
            return False
        document = read.body
        self._load_filters(document)
        ok = True
        for kind in (k.value for k in STATUS_KINDS):
            try:
                self.enums[kind] = resolve_enums(document, self._templates[kind])
            except EnumResolutionError as exc:
                ok = False
                self.enums[kind] = fallback_enums(kind)
                log.warning(
                    "status route not described by OpenAPI; using documented enum values",
                    extra={"fields": {"workspace": self.name, "kind": kind, "error": str(exc)}},
                )
        self._key_digests()
        return ok

    def _load_filters(self, document: dict[str, Any]) -> None:
        paths = self.cfg.paths
        routes = {"function_jobs": paths.function_jobs, "function_runs": paths.function_runs}
        self.filters = resolve_filter_names(document, routes)
        if self.filters.fallback:
            log.warning(
                "list route not described by OpenAPI; using documented filter names",
                extra={"fields": {"workspace": self.name, "routes": sorted(self.filters.fallback),
                                  "error": self.filters.reason}},
            )  # fmt: skip
        for route in routes:
            undeclared = self.filters.undeclared(route)
            # DEBUG: nobody asked for these yet; an intake that names one is
            # refused (422) and logged then.
            if undeclared:
                log.debug(
                    "list route does not declare some filters; intake naming them is refused",
                    extra={"fields": {"workspace": self.name, "route": route,
                                      "undeclared": undeclared}},
                )  # fmt: skip


def workspace_transport(cfg: WorkspaceConfig) -> HttpTransport:
    """The workspace's own connections: its pool, its answer limit, its CA bundle."""
    ca_pem = None
    if cfg.ca_bundle:
        try:
            with open(cfg.ca_bundle, "rb") as f:
                ca_pem = f.read()
        except OSError as exc:
            raise ConfigError(
                f"workspaces.ca_bundle: cannot read {cfg.ca_bundle}: {exc.strerror or exc}"
            ) from None
    try:
        return HttpTransport(
            max_connections=cfg.max_in_flight,
            max_response_bytes=cfg.max_response_bytes,
            idle_timeout_s=cfg.pool_idle_timeout_s,
            ca_pem=ca_pem,
        )
    except Exception as exc:  # the library refuses a bad PEM or a missing trust store
        raise ConfigError(f"workspaces.ca_bundle: {cfg.ca_bundle or 'system'}: {exc}") from None


def workspace_client(
    cfg: WorkspaceConfig,
    token: str | None,
    clock: Clock,
    replica: str | None = None,
    transport: Transport | None = None,
) -> WorkspaceClient:
    """A client of ``cfg``'s workspace over its own connections (or ``transport``),
    behind a gate of its own; its requests name ``replica`` when given."""
    gate = WorkspaceGate(cfg.max_requests_per_second, cfg.max_in_flight, clock.monotonic)
    transport = transport or workspace_transport(cfg)
    return WorkspaceClient(cfg, transport, token, gate, clock, replica)
