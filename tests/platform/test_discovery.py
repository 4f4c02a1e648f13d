"""Execution-model discovery against the simulator's sample catalog, over HTTP and the CLI."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from orchestrator.platform.cli import add_explain_command, fetch, render
from tests.platform.conftest import Api

ROWS = {
    "invoices.validate": (["entity_save"], True),
    "customers.normalize": (["entity_save"], True),
    "pricing.quote": (["command"], True),
    "webhooks.stripe": (["http_endpoint"], True),
    "billing.sync-invoices": (["global_job_api", "function_schedule"], False),
    "orders.on-shipped": (["entity_trigger"], False),
    "orders.approve": (["action"], False),
}


async def explain(api: Api, key: str, workspace: str = "default") -> tuple[int, Any]:
    return await api.call("GET", f"/v1/functions/{key}/execution-model?workspace={workspace}")


@pytest.mark.parametrize("key", sorted(ROWS))
async def test_each_decision_table_row(api: Api, key: str) -> None:
    surfaces, blocking = ROWS[key]
    status, body = await explain(api, key)
    assert status == 200, body
    assert [r["surface"] for r in body["rows"]] == surfaces
    assert body["surface"] == surfaces[0]
    assert body["request_blocking"] is blocking
    assert body["completion_evidence"]
    assert body["enum_fallback"] is False
    assert body["enums"]["BusinessFunctionContract"]["values"]["Job"] == 3
    assert body["enums"]["BusinessFunctionContract"]["source"] == "openapi"
    if key != "pricing.quote":
        assert body["contradictions"] == []


async def test_queued_rows_say_how_to_track(api: Api) -> None:
    _, body = await explain(api, "billing.sync-invoices")
    assert body["callable"] is True
    assert body["publication"]["kind"] == "Enqueue"
    assert [r["tracking_kind"] for r in body["rows"]] == ["function_job", "schedule"]
    assert body["schedules"][0]["schedule_id"] == "sch-billing-nightly"
    assert body["schedules"][0]["target_health"] == "Healthy"
    _, body = await explain(api, "orders.approve")
    assert body["execution_model"] == "validated_then_queued"
    assert [r["tracking_kind"] for r in body["rows"]] == ["action_work"]
    assert body["rows"][0]["tracking_fields"] == ["action_id", "entity_id", "job_id"]
    _, body = await explain(api, "orders.on-shipped")
    assert body["bindings"][0]["source"] == "EntityTrigger"
    assert [r["tracking_kind"] for r in body["rows"]] == ["trigger_work"]
    assert "trigger_binding_id" in body["rows"][0]["tracking_fields"]
    _, body = await explain(api, "webhooks.stripe")
    assert [r["tracking_kind"] for r in body["rows"]] == [None]  # request-blocking


@pytest.mark.parametrize(
    ("key", "codes", "callable_"),
    [
        (
            "pricing.quote",
            {
                "schedule_target_not_global_job",
                "schedule_target_unhealthy",
                "enabled_schedule_without_next_run",
            },
            True,
        ),
        ("totals.recalculate", {"enqueue_publication_on_non_job_contract"}, True),
        ("imports.legacy-csv", {"key_retired"}, False),
        ("payroll.run", {"key_disabled"}, False),
    ],
)
async def test_each_contradiction_in_the_sample(
    api: Api, key: str, codes: set[str], callable_: bool
) -> None:
    status, body = await explain(api, key)
    assert status == 200, body
    assert {f["code"] for f in body["contradictions"]} == codes
    assert body["callable"] is callable_


async def test_unknown_key_and_bad_input(api: Api) -> None:
    status, body = await explain(api, "no.such-function")
    assert status == 404 and body["field"] == "function_key"
    status, body = await explain(api, "billing.sync-invoices", workspace="nope")
    assert status == 422 and body["field"] == "workspace"
    status, body = await explain(api, "..")
    assert status in (404, 422)


async def test_enums_fall_back_visibly_without_the_document(api: Api) -> None:
    rules = {"rules": [{"route": "openapi", "fault": "http_5xx"}]}
    assert (await api.sim("PUT", "/_sim/faults", rules))[0] == 200
    status, body = await explain(api, "billing.sync-invoices")
    assert status == 200, body
    assert body["enum_fallback"] is True
    contract = body["enums"]["BusinessFunctionContract"]
    assert contract["source"] == "fallback" and "500" in contract["fallback_reason"]
    assert body["surface"] == "global_job_api"


async def test_catalog_unreadable_is_a_502(api: Api) -> None:
    rules = {"rules": [{"route": "admin", "fault": "http_5xx"}]}
    assert (await api.sim("PUT", "/_sim/faults", rules))[0] == 200
    status, body = await explain(api, "billing.sync-invoices")
    assert status == 502 and "HTTP 500" in body["detail"]


def _args(*words: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_explain_command(parser.add_subparsers())
    return parser.parse_args(["explain", *words])


async def test_cli_against_the_service_and_the_workspace(api: Api) -> None:
    code, answer, error = await fetch(_args("payroll.run", "--server", api.url))
    assert (code, error) == (0, None)
    assert answer is not None and answer["callable"] is False
    text = render(answer)
    assert "key_disabled" in text and "NOT callable" in text
    code, direct, _ = await fetch(_args("payroll.run", "--workspace-url", api.sim_url))
    assert code == 0 and direct is not None
    assert direct["rows"] == answer["rows"]
    code, _, error = await fetch(_args("nope.nothing", "--server", api.url))
    assert code == 1 and error is not None and "404" in error
    code, _, error = await fetch(_args("nope.nothing", "--workspace-url", api.sim_url))
    assert code == 1
    code, _, error = await fetch(_args("payroll.run", "--server", "http://127.0.0.1:9"))
    assert code == 3 and error
