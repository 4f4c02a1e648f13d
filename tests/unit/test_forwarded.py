"""``workspace.forwarded``: how a failed forwarded request is reported, pure."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.workspace.forwarded import failure, safe_problem
from orchestrator.workspace.readresult import ReadResult, answered, timed_out, trouble

PROBLEM = b'{"title": "Bad", "status": 400, "detail": "no"}'


def http(status: int, body: bytes = PROBLEM, retry_after: float | None = None) -> ReadResult:
    return answered(status, body, retry_after, 0.01)


@pytest.mark.parametrize(
    ("read", "ours", "kind"),
    [
        (http(400), 422, None),
        (http(422), 422, None),
        (http(410), 422, None),
        (http(404), 404, None),
        (http(409), 409, None),
        (http(401), 502, "unauthorized"),
        (http(403), 502, "unauthorized"),
        (http(500), 502, "http_5xx"),
        (http(503), 502, "http_5xx"),
        (http(503, retry_after=5), 503, "http_5xx"),
        (http(429, retry_after=5), 503, "rate_limited"),
        (http(429), 502, "rate_limited"),
        (http(200, b"not json"), 502, "invalid_response"),
        (http(200, b"[1, 2]"), 502, "invalid_response"),  # a body the caller cannot use
        (timed_out(10, 10.0), 504, "timeout"),
        (trouble("connection", "ClientConnectorError", 0.0), 502, "connection"),
    ],
)
def test_each_answer_has_its_status_and_kind(read: ReadResult, ours: int, kind: str | None) -> None:
    why = failure(read, "the cancel")
    assert why.status == ours
    if kind is None:  # a refusal: what the workspace said, no error kind
        assert why.extra["workspace_status"] == read.http_status
        assert why.extra["workspace_problem"]["status"] == 400
        assert "error_kind" not in why.extra
        assert why.detail == f"the workspace refused the cancel (HTTP {read.http_status})"
    else:
        assert why.extra == {"error_kind": kind, "workspace_status": read.http_status}
        assert why.detail.startswith(f"the cancel failed: {kind}")
    assert (why.retry_after is not None) == (ours == 503)


def test_a_refusal_of_our_own_read_is_the_workspaces_error() -> None:
    why = failure(http(400), "GET /catalog", command=False)
    assert why.status == 502
    assert why.extra["error_kind"] == "invalid_response"
    assert why.extra["workspace_problem"] == {"title": "Bad", "status": 400, "detail": "no"}


def test_a_problem_keeps_its_standard_members_only_and_no_secret() -> None:
    body: dict[str, Any] = {
        "Type": "urn:x",
        "TITLE": "Refused",
        "status": 422,
        "detail": "token s3cr3t and Authorization: Bearer abc.def refused",
        "errors": {"Field": ["s3cr3t is wrong", 7], "Other": "one message"},
        "traceId": "00-1",
        "token": "s3cr3t",
        "exception": {"stack": "at Foo()"},
    }
    out = safe_problem(body, "s3cr3t")
    assert out == {
        "type": "urn:x",
        "title": "Refused",
        "status": 422,
        "detail": "token [redacted] and Authorization: Bearer [redacted] refused",
        "errors": {"Field": ["[redacted] is wrong"], "Other": ["one message"]},
    }


def test_a_problem_is_bounded() -> None:
    huge = {
        "title": "t" * 10_000,
        "status": True,  # not a status
        "errors": {f"f{i}": ["m" * 400] * 10 for i in range(100)},
    }
    out = safe_problem(huge)
    assert out is not None
    assert len(out["title"]) == 500 and "status" not in out
    assert "errors" not in out  # past the size bound it goes whole
    few = safe_problem({"errors": {f"f{i}": ["m"] * 10 for i in range(100)}})
    assert few is not None and len(few["errors"]) == 20
    assert all(len(messages) == 5 for messages in few["errors"].values())
    assert safe_problem([1]) is None and safe_problem({"traceId": "x"}) is None
