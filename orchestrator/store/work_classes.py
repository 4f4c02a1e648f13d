"""Adaptive polling's rows: what is stored of a work class, and how a flush merges.

The store never looks inside a summary: a merge brings its own ``fold``, a pure
function from the stored summary to the new one, which the store runs with the
row locked, so that two replicas' merges of one class both count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class WorkClassSummary:
    """What adaptive polling has learned of one work class (``engine/adaptive.py``):
    the learner's own JSON object, stored as it is. One row per (workspace, kind,
    work_class)."""

    workspace: str
    kind: str
    work_class: str
    summary: dict[str, Any]
    updated_at: float


@dataclass(frozen=True, slots=True)
class WorkClassMerge:
    """Fold what one process learned of a class into the stored row.

    ``fold`` gets the stored summary (None: no row) and returns the one to store;
    it may run on another thread (SQLite's writer) and must touch nothing shared.
    """

    workspace: str
    kind: str
    work_class: str
    fold: Callable[[dict[str, Any] | None], dict[str, Any]]
    updated_at: float

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workspace, self.kind, self.work_class)

    def folded(self, stored: dict[str, Any] | None) -> WorkClassSummary:
        return WorkClassSummary(*self.key, self.fold(stored), self.updated_at)
