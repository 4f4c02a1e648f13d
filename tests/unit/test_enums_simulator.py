"""The resolver against the bundled simulator's own OpenAPI document (decoys included)."""

from __future__ import annotations

import pytest

from orchestrator.config import WorkspacePaths
from orchestrator.interpret import resolve_enums
from orchestrator.simulator.openapi import build_document

BUILD_STATUS = {0: "Queued", 1: "Running", 2: "Succeeded", 3: "Failed", 4: "Cancelled"}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "function_job",
            {
                "status": {0: "Queued", 1: "Leased", 2: "Completed", 3: "Failed", 4: "Cancelled"},
                "run.status": {
                    0: "Running",
                    1: "Success",
                    2: "Failed",
                    3: "Skipped",
                    4: "Cancelled",
                    5: "TimedOut",
                },
            },
        ),
        ("net_operation_build", {"status": BUILD_STATUS, "kind": {0: "Build", 1: "Check"}}),
        ("workspace_ui_build", {"status": BUILD_STATUS, "kind": {0: "Check", 1: "Build"}}),
    ],
)
def test_simulator_document(kind: str, expected: dict[str, dict[int, str]]) -> None:
    enums = resolve_enums(build_document(), getattr(WorkspacePaths(), kind))
    assert enums.source == "openapi"
    for path, values in expected.items():
        assert enums.values[path] == values
