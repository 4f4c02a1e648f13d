"""The one vocabulary: the contract's words, and nothing of the project imported."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator.vocabulary as vocabulary
from orchestrator.vocabulary import (
    FILTER_KINDS,
    STATUS_KINDS,
    ErrorKind,
    Kind,
    NextPollReason,
    Outcome,
    PollResult,
    TrackingState,
)


def test_the_words_are_the_contracts() -> None:
    assert list(Kind) == [
        "function_job",
        "net_operation_build",
        "workspace_ui_build",
        "schedule",
        "trigger_work",
        "action_work",
    ]
    assert FILTER_KINDS == ("trigger_work", "action_work")
    assert STATUS_KINDS == ("function_job", "net_operation_build", "workspace_ui_build")
    assert list(TrackingState) == ["active", "terminal"]
    assert list(Outcome) == [
        "succeeded",
        "failed",
        "cancelled",
        "deadline_exceeded",
        "not_found",
        "abandoned",
    ]
    assert set(ErrorKind) == {
        "timeout",
        "connection",
        "http_5xx",
        "rate_limited",
        "unauthorized",
        "invalid_response",
    }
    assert len(NextPollReason) == 7
    assert NextPollReason.ADAPTIVE == "adaptive"


def test_a_poll_result_is_an_answer_or_an_error_kind() -> None:
    assert set(PollResult) == {"ok", "not_found"} | set(ErrorKind)


def test_members_are_their_strings() -> None:
    assert Kind.SCHEDULE == "schedule" and f"{Outcome.NOT_FOUND}" == "not_found"
    assert str(PollResult.HTTP_5XX) == "http_5xx" and type(str(Kind.SCHEDULE)) is str
    assert {"terminal": 1}[TrackingState.TERMINAL] == 1


def test_imports_nothing_of_the_project() -> None:
    tree = ast.parse(Path(vocabulary.__file__).read_text())
    imported = [
        name
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    ]
    assert imported and not any(name.startswith("orchestrator") for name in imported)
