"""What the interpreter says about one status body."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal


class Phase(StrEnum):
    PENDING = "pending"  # non-terminal: keep polling
    SUCCEEDED = "succeeded"  # terminal success, with the evidence
    FAILED = "failed"  # terminal non-success
    CANCELLED = "cancelled"  # terminal non-success
    ANOMALY = "anomaly"  # readable but breaks the contract: keep polling, count it
    INVALID = "invalid"  # not a status body at all: transport trouble (invalid_response)


TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


@dataclass(frozen=True, slots=True)
class EnumMap:
    """Integer enum values by lower-cased dotted property path of the status model.

    Paths are relative to the model itself (a ``Data`` envelope is stripped):
    ``"status"``, ``"kind"``, ``"run.status"``, ``"source"``.
    """

    values: Mapping[str, Mapping[int, str]]
    source: Literal["openapi", "fallback"]


@dataclass(frozen=True, slots=True)
class Verdict:
    phase: Phase
    remote_status: str | None = None  # enum name, e.g. "Leased"
    fingerprint: str = ""  # changes exactly when the observable remote state changes
    next_run_at: float | None = None  # unix seconds, for a Queued job waiting for NextRunAt
    can_cancel: bool | None = None
    result: dict[str, Any] | None = None  # normalized, on terminal phases
    anomaly: str | None = None  # reason code on ANOMALY / INVALID
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES
