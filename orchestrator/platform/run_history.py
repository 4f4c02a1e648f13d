"""The attempts (runs) of a finished function job, for its terminal result.

A job describes delivery and worker state; a run is one actual execution and
its business outcome. The job's status model only shows its latest run, so the
runs are read from Function operations (filtered by the job's function and the
time since it was created; only rows whose JobId is this job are kept) and put
beside the job's own fields as ``attempts``. Reading them never changes the
outcome: on any failure ``attempts`` is null and ``attempts_error`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.clock import iso
from orchestrator.platform.operations import read_rows
from orchestrator.platform.wire import as_timestamp, enum_name, get_ci, text

if TYPE_CHECKING:
    from orchestrator.engine.engine import Engine
    from orchestrator.engine.entry import Entry

_KIND = "function_job"


def attempts_from_runs(
    job_id: str, runs: list[Mapping[str, Any]], run_status: Mapping[int, str]
) -> list[dict[str, Any]]:
    """This job's runs, by attempt, in the shape the result carries them."""
    mine = [r for r in runs if text(r, "JobId") == job_id]
    out = [
        {
            "run_id": text(r, "RunId"),
            "attempt": get_ci(r, "Attempt"),
            "status": enum_name(get_ci(r, "Status"), run_status),
            "started_at": text(r, "StartedAt"),
            "completed_at": text(r, "CompletedAt"),
            "duration_ms": get_ci(r, "DurationMs"),
            "result_summary": text(r, "ResultSummary"),
            "error_summary": text(r, "ErrorSummary"),
        }
        for r in mine
    ]
    out.sort(
        key=lambda a: (a["attempt"] if isinstance(a["attempt"], int) else 0, a["started_at"] or "")
    )
    return out


class RunHistory:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def attach(
        self, entry: Entry, body: Any, result: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``result`` plus ``attempts`` (or ``attempts: null`` and ``attempts_error``)."""
        out = dict(result or {})
        try:
            attempts, error = await self._read(entry, body)
        except Exception as exc:
            attempts, error = None, f"run history unreadable: {type(exc).__name__}"
        out["attempts"] = attempts
        out["attempts_error"] = error
        return out

    async def _read(
        self, entry: Entry, body: Any
    ) -> tuple[list[dict[str, Any]] | None, str | None]:
        eng = self.engine
        model = get_ci(body, "Data") if get_ci(body, "JobId") is None else body
        function_id = text(model, "BusinessFunctionId") or text(model, "FunctionKey")
        created = as_timestamp(get_ci(model, "CreatedAt"))
        if function_id is None or created is None:
            return None, "the job carries no BusinessFunctionId or CreatedAt to filter runs by"
        client = eng.clients[entry.workspace]
        if client.gate.blocked_for() > 0:
            return None, "the workspace asked us to wait (Retry-After)"
        query = {"FunctionId": function_id, "From": iso(created) or ""}
        runs, read = await read_rows(
            client, client.cfg.paths.function_runs, query, "RunId", "StartedAt"
        )
        eng.probes.admin_request(entry.workspace, "function_runs", read.result)
        if runs is None:
            status = f"HTTP {read.http_status}" if read.http_status is not None else read.result
            return None, f"GET {client.cfg.paths.function_runs} failed: {status}"
        run_status = client.enums[_KIND].values.get("run.status", {})
        attempts = attempts_from_runs(entry.remote_id, runs, run_status)
        expected = get_ci(model, "CurrentAttempt")
        if (
            isinstance(expected, int)
            and not isinstance(expected, bool)
            and len(attempts) < expected
        ):
            return attempts, f"found {len(attempts)} of {expected} runs"
        return attempts, None
