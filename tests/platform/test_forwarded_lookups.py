"""Follow-ups, the execution-model lookup and ``explain``: what the service asks the
workspace for a caller is checked first, and its failure is named (issue #37).

Their successful answers are covered in tests/core/test_intake.py and
tests/platform/test_discovery.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import aiohttp

from orchestrator.platform.cli import add_explain_command, fetch
from orchestrator.simulator import start_simulator
from tests.platform.conftest import Api
from tests.serveproc import free_port

FOLLOW_UPS = "/v1/trackings/follow-ups"


async def service_requests(api: Api) -> list[dict[str, Any]]:
    """Every request the service (not the test) made to the simulator, in order."""
    status, body = await api.sim("GET", "/_sim/requests")
    assert status == 200, body
    return [r for r in body["requests"] if r["replica"] is not None]


# -- follow-ups -------------------------------------------------------------------


async def test_follow_ups_bad_input_is_a_422_and_nothing_is_tracked(api: Api) -> None:
    ids = "runtime_result.FollowUpOperationIds"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"runtime_result": {"FollowUpOperationIds": ["job-good", "bad id"]}}, f"{ids}.1"),
        ({"runtime_result": {"FollowUpOperationIds": "job-good"}}, ids),
        # Field names match in any case: two spellings are two answers, not one.
        (
            {"runtime_result": {"FollowUpOperationIds": ["job-good"], "followupoperationids": []}},
            ids,
        ),
        ({"runtime_result": {"FollowUpOperationIds": [f"job-{i}" for i in range(1001)]}}, ids),
        # With no id returned, what would apply to each is still checked.
        ({"workspace": "elsewhere", "runtime_result": {"FollowUpOperationIds": []}}, "workspace"),
        ({"labels": {"bad key!": "x"}, "runtime_result": {"FollowUpOperationIds": []}}, "labels"),
        (
            {"timeout_s": 10**9, "runtime_result": {"FollowUpOperationIds": ["job-good"]}},
            "timeout_s",
        ),
    ]
    for body, field in cases:
        status, problem = await api.call("POST", FOLLOW_UPS, json=body)
        assert status == 422, (body, problem)
        assert problem["field"] == field, (body, problem)
    _, page = await api.call("GET", "/v1/trackings")
    assert page["items"] == []
    # A good one afterwards is tracked and read; none of the refused ids ever is.
    status, out = await api.call(
        "POST", FOLLOW_UPS, json={"runtime_result": {"FollowUpOperationIds": ["job-later"]}}
    )
    assert status == 200 and [t["remote_id"] for t in out["items"]] == ["job-later"], out
    async with asyncio.timeout(10):
        while not await api.requests_for("job-later"):
            await asyncio.sleep(0.02)
    assert {r["path"].rsplit("/", 1)[-1] for r in await service_requests(api)} <= {
        "job-later",
        "swagger.json",
    }


# -- the execution-model lookup ---------------------------------------------------


def _catalog_reads(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in requests if r["route"] == "admin"]


async def test_execution_model_bad_input_is_a_422_and_nothing_is_read(api: Api) -> None:
    route = "/v1/functions/{}/execution-model"
    for path, field in (
        (route.format("bad%20key") + "?workspace=default", "function_key"),
        (route.format("k" * 201), "function_key"),
        (route.format("billing.sync-invoices") + "?workspace=elsewhere", "workspace"),
        (route.format("billing.sync-invoices") + "?workspce=default", "workspce"),
    ):
        status, problem = await api.call("GET", path)
        assert status == 422, (path, problem)
        assert problem["field"] == field, (path, problem)
    assert _catalog_reads(await service_requests(api)) == []


async def test_execution_model_workspace_trouble_is_named(api: Api) -> None:
    path = "/v1/functions/billing.sync-invoices/execution-model"
    # (fault rule on the catalog routes, our status, error_kind, the workspace's status)
    cases: list[tuple[dict[str, Any], int, str, int | None]] = [
        ({"fault": "http_5xx", "status": 500}, 502, "http_5xx", 500),
        ({"fault": "http_5xx", "status": 403}, 502, "unauthorized", 403),
        ({"fault": "reset"}, 502, "connection", None),
        ({"fault": "rate_limited", "retry_after_s": 0}, 503, "rate_limited", 429),
        ({"fault": "unavailable", "retry_after_s": 0}, 503, "http_5xx", 503),
        # Our own read refused: nothing of the caller's was in it, so not the caller's fault.
        ({"fault": "http_5xx", "status": 400}, 502, "invalid_response", 400),
    ]
    for rule, ours, kind, theirs in cases:
        status, body = await api.sim("PUT", "/_sim/faults", {"rules": [{"route": "admin", **rule}]})
        assert status == 200, body
        async with api.session.get(api.url + path) as resp:
            status, body = resp.status, await resp.json(content_type=None)
            assert (status == 503) == ("Retry-After" in resp.headers), (rule, resp.headers)
        assert status == ours, (rule, body)
        assert body["error_kind"] == kind and body["workspace_status"] == theirs, (rule, body)
        assert body["route"].startswith("/api/workspace/admin/"), body
        if theirs == 400:
            assert body["workspace_problem"]["detail"] == "Injected server error.", body
        else:
            assert "workspace_problem" not in body, body


# -- explain ----------------------------------------------------------------------


def _args(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_explain_command(parser.add_subparsers())
    return parser.parse_args(["explain", *words])


async def test_explain_bad_key_is_one_line_and_asks_nothing() -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=1)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orchestrator", "explain", "bad key!", "--workspace-url",
            sim.url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 2, err
        lines = err.decode().splitlines()
        assert len(lines) == 1 and "FUNCTION_KEY" in lines[0], lines
        assert out == b""
        async with (
            aiohttp.ClientSession() as session,
            session.get(sim.url + "/_sim/requests") as resp,
        ):
            assert (await resp.json())["requests"] == []
    finally:
        await sim.close()
    # With --server too: nothing listens there, and nothing is tried.
    nowhere = f"http://127.0.0.1:{free_port()}"
    code, answer, error = await fetch(_args("k" * 201, "--server", nowhere))
    assert (code, answer) == (2, None) and error is not None and "FUNCTION_KEY" in error


# -- the OpenAPI document ---------------------------------------------------------


async def test_openapi_lists_every_answer_of_the_forwarding_routes(api: Api) -> None:
    status, doc = await api.call("GET", "/openapi.json")
    assert status == 200
    answers = {
        ("/v1/trackings/{tracking_id}/cancel", "post"): {
            "202", "404", "409", "422", "502", "503", "504",
        },
        ("/v1/trackings/{tracking_id}/stop-retries", "post"): {
            "200", "202", "404", "409", "422", "502", "503", "504",
        },
        ("/v1/functions/{function_key}/execution-model", "get"): {
            "200", "404", "422", "502", "503", "504",
        },
        ("/v1/trackings/follow-ups", "post"): {"200", "422"},
    }  # fmt: skip
    forwarded = "#/components/schemas/ForwardedProblem"
    for (path, method), codes in answers.items():
        responses = doc["paths"][path][method]["responses"]
        assert codes <= set(responses), (path, sorted(responses))
        if "504" in codes:
            for code in ("502", "503", "504"):
                schema = responses[code]["content"]["application/problem+json"]["schema"]
                assert schema == {"$ref": forwarded}, (path, code)
    problem = doc["components"]["schemas"]["ForwardedProblem"]["properties"]
    assert {"workspace_status", "workspace_problem", "error_kind"} <= set(problem)
    version = doc["paths"]["/v1/trackings/{tracking_id}/stop-retries"]["post"]["requestBody"]
    schema = version["content"]["application/json"]["schema"]["properties"]
    assert schema["expected_modified_at"]["format"] == "date-time"
