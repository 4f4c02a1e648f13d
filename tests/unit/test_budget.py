"""A function job's time budget read from its status body (interpret/interpreter.py)."""

from __future__ import annotations

import pytest

from orchestrator.interpret.interpreter import job_budget


@pytest.mark.parametrize(
    ("body", "budget"),
    [
        ({"Status": 1, "TimeoutSeconds": 10, "EffectiveMaxAttempts": 3, "RetryDelaySeconds": 5},
         10 * 3 + 5 * 2),
        # null TimeoutSeconds: the workspace's runtime default applies (here 300)
        ({"Status": 1, "TimeoutSeconds": None, "EffectiveMaxAttempts": 2, "RetryDelaySeconds": 1},
         300 * 2 + 1),
        ({"Status": 1, "EffectiveMaxAttempts": 1}, 300),  # one attempt needs no delay
        ({"Data": {"Status": 0, "TimeoutSeconds": 60, "EffectiveMaxAttempts": 1}}, 60),
        ({"status": 0, "timeoutSeconds": 60, "effectiveMaxAttempts": 2,
          "retryDelaySeconds": 0.5}, 120.5),
        # Not shown: no guess, the tracking keeps its default deadline.
        ({"Status": 1, "TimeoutSeconds": 10}, None),
        ({"Status": 1, "TimeoutSeconds": 10, "EffectiveMaxAttempts": 3}, None),
        ({"Status": 1, "EffectiveMaxAttempts": 0}, None),
        ({"Status": 1, "EffectiveMaxAttempts": True}, None),
        ("not an object", None),
    ],
)  # fmt: skip
def test_job_budget(body: object, budget: float | None) -> None:
    assert job_budget(body, 300.0) == budget
