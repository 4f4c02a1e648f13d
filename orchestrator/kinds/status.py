"""Kinds read from one status route: function jobs and the two project builds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.interpret import TERMINAL_PHASES, Phase, interpret
from orchestrator.interpret.interpreter import job_budget
from orchestrator.kinds.base import Adopted, JsonObject, Judgement, PollTarget
from orchestrator.vocabulary import KINDS, Kind
from orchestrator.workspace.readresult import ReadResult

if TYPE_CHECKING:
    from orchestrator.interpret import EnumMap
    from orchestrator.platform.run_history import RunHistory
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient


def judge(
    kind: str,
    r: ReadResult,
    enums: EnumMap,
    concludes: bool = False,
    budget_default_s: float | None = None,
) -> Judgement:
    """One status read judged: pure. ``concludes``: a terminal result still needs the
    handler's side reads; ``budget_default_s``: the kind has a budget (a function
    job's), this the timeout a body without one is given."""
    reads = ((r.result, r.duration),)
    if r.unchanged:
        return Judgement(
            "ok", reads, answered=True, retry_after=r.retry_after, unchanged=True, digest=r.digest
        )
    if r.result != "ok":
        error = None if r.result == "not_found" else r.error
        return Judgement(r.result, reads, r.answered, r.retry_after, error)
    verdict = interpret(kind, r.body, enums)
    if verdict.phase is Phase.INVALID:
        message = f"not a status body ({verdict.anomaly})"
        invalid: JsonObject = {"kind": "invalid_response", "message": message}
        read = (("invalid_response", r.duration),)
        return Judgement("invalid_response", read, True, r.retry_after, invalid)
    ordinary = verdict.phase is Phase.PENDING and verdict.next_run_at is None
    return Judgement(
        "ok",
        reads,
        answered=True,
        retry_after=r.retry_after,
        phase=verdict.phase,
        fingerprint=verdict.fingerprint,
        digest=r.digest if ordinary else None,
        remote_status=verdict.remote_status,
        remote=r.body,
        result=verdict.result,
        anomaly=verdict.anomaly if verdict.phase is Phase.ANOMALY else None,
        anomaly_details=verdict.details,
        next_run_at=verdict.next_run_at,
        budget_s=None if budget_default_s is None else job_budget(r.body, budget_default_s),
        conclude=concludes and verdict.phase in TERMINAL_PHASES,
        work=verdict.work,
    )


class StatusHandler:
    """``function_job``, ``net_operation_build``, ``workspace_ui_build``."""

    def __init__(self, kind: str, history: RunHistory | None = None) -> None:
        self.kind = kind
        self._history = history  # function jobs: their runs go into the result
        self._budget = KINDS[Kind(kind)].budget

    def adopt(self, t: Tracking, client: WorkspaceClient) -> Adopted:
        if t.remote_digest is not None and t.remote_fingerprint is not None:
            # An ordinary in-progress body: its digest and fingerprint stand for it.
            # Keyed by the enums it was judged with, the digest simply fails to
            # match if they have changed since.
            return Adopted(t.remote_fingerprint, t.remote_digest)
        if t.remote is not None:
            verdict = interpret(self.kind, t.remote, client.enums[self.kind])
            return Adopted(verdict.fingerprint, None, verdict.next_run_at)
        return Adopted()

    async def poll(self, target: PollTarget, client: WorkspaceClient) -> Judgement:
        found = await client.read(self.kind, target.remote_id, target.digest)
        budget = client.cfg.job_timeout_default_s if self._budget else None
        return judge(self.kind, found, client.enums[self.kind], self._history is not None, budget)

    async def conclude(
        self, target: PollTarget, client: WorkspaceClient, judgement: Judgement
    ) -> dict[str, Any] | None:
        if self._history is None:
            return judgement.result
        return await self._history.attach(
            client, target.remote_id, judgement.remote, judgement.result
        )
