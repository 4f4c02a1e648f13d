"""One configured Moltaro workspace: its HTTP reads, its enums, its limits.

Routes always resolve against the workspace's configured base URL; nothing
from input ever chooses a host.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Coroutine, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from yarl import URL

from orchestrator.config import KINDS, WorkspaceConfig
from orchestrator.engine.readresult import ReadResult, answered, timed_out, trouble
from orchestrator.errors import EnumResolutionError
from orchestrator.interpret import EnumMap, fallback_enums, resolve_enums

log = logging.getLogger("orchestrator.workspace")


class WorkspaceClient:
    def __init__(
        self,
        cfg: WorkspaceConfig,
        session: aiohttp.ClientSession,
        token: str | None,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self._session = session
        self.token = token
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s)
        self._templates = {
            "function_job": cfg.paths.function_job,
            "net_operation_build": cfg.paths.net_operation_build,
            "workspace_ui_build": cfg.paths.workspace_ui_build,
        }
        self.enums: dict[str, EnumMap] = {k: fallback_enums(k) for k in KINDS}
        self._digest_keys: dict[str, bytes] = {}
        self._key_digests()

    def _key_digests(self) -> None:
        """Key each kind's body digests with its enum map: the same bytes read under
        other enums (a changed OpenAPI document, across restarts too) never match."""
        for kind, enum_map in self.enums.items():
            spelled = repr(sorted((path, sorted(m.items())) for path, m in enum_map.values.items()))
            self._digest_keys[kind] = hashlib.blake2b(spelled.encode(), digest_size=32).digest()

    def route_template(self, kind: str) -> str:
        return self._templates[kind]

    def status_url(self, kind: str, remote_id: str) -> str:
        return self.cfg.base_url + self._templates[kind].replace("{id}", remote_id)

    def cancel_url(self, remote_id: str) -> str:
        return self.cfg.base_url + self.cfg.paths.function_job_cancel.replace("{id}", remote_id)

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
        return await self._request("POST", self.cancel_url(remote_id))

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

    async def _request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        *,
        seen: bytes | None = None,
        digest_key: bytes | None = None,
    ) -> ReadResult:
        started = time.monotonic()
        headers = self._headers
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
        try:
            # encoded=True: the id was validated to URL-safe characters, and
            # skipping re-quoting keeps the hot path cheap.
            async with self._session.request(
                method,
                URL(url, encoded=True),
                headers=headers,
                data=body,
                timeout=self._timeout,
                allow_redirects=False,
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after_header = (
                    resp.headers.get("Retry-After") if status in (429, 503) else None
                )
        except TimeoutError:
            return timed_out(self.cfg.request_timeout_s, time.monotonic() - started)
        except (aiohttp.ClientError, OSError) as exc:
            return trouble("connection", type(exc).__name__, time.monotonic() - started)
        return answered(
            status, raw, retry_after_header, time.monotonic() - started, seen, digest_key
        )

    async def load_enums(self) -> bool:
        """Resolve every kind's enums from the installed OpenAPI document.

        Returns True when all came from the document. On any failure the
        documented fallback stays in force (visible in metrics and logs).
        """
        url = self.cfg.base_url + self.cfg.openapi_path
        try:
            async with self._session.get(
                URL(url, encoded=True),
                headers=self._headers,
                timeout=self._timeout,
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    raise EnumResolutionError(f"OpenAPI document answered HTTP {resp.status}")
                document = orjson.loads(await resp.read())
        except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
            log.warning(
                "OpenAPI document unreachable; using documented enum values",
                extra={"fields": {"workspace": self.name, "error": type(exc).__name__}},
            )
            return False
        except EnumResolutionError as exc:
            log.warning(
                "OpenAPI document unusable; using documented enum values",
                extra={"fields": {"workspace": self.name, "error": str(exc)}},
            )
            return False
        ok = True
        for kind in KINDS:
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
