"""Every route refuses a query parameter it does not know: 422 naming it, as bodies do."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import cast

from orchestrator.api.app import create_app
from orchestrator.api.openapi import build_openapi
from orchestrator.api.query import accepted_queries
from orchestrator.config import Settings
from orchestrator.metrics import Metrics
from orchestrator.runtime import Runtime
from tests.core.conftest import Api

# Values for the path parameters: well-formed, so that only the query is wrong.
PATH_VALUES = {
    "tracking_id": "trk_" + "0" * 24,
    "function_key": "billing.sync-invoices",
    "name": "app",
    "delivery_id": "1",
    "group": "some-group",
}


def _fill(template: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], template)


async def test_every_get_route_of_the_openapi_document_refuses_an_unknown_parameter(
    api: Api,
) -> None:
    status, document = await api.call("GET", "/openapi.json")
    assert status == 200
    routes = [path for path, item in document["paths"].items() if "get" in item]
    assert {"/v1/trackings", "/v1/events", "/healthz", "/metrics", "/openapi.json"} <= set(routes)
    for template in routes:
        path = _fill(template)
        status, body = await api.call("GET", path + "?bogus_param=1")
        assert status == 422, (path, status, body)
        assert body["field"] == "bogus_param", (path, body)
        assert "bogus_param" in body["detail"], (path, body)


async def test_the_misspellings_a_user_makes_are_refused(api: Api) -> None:
    for path, name in (
        ("/v1/trackings?status=active", "status"),
        ("/v1/events?afer=3", "afer"),
        ("/v1/trackings?state=active&limt=5", "limt"),
    ):
        status, body = await api.call("GET", path)
        assert (status, body["field"]) == (422, name), (path, body)


async def test_known_parameters_still_work_and_their_errors_are_422(api: Api) -> None:
    for path in ("/v1/trackings?state=active&limit=5", "/v1/events?after=0&limit=2"):
        assert (await api.call("GET", path))[0] == 200, path
    # prometheus-client's own filter, declared in the document, stays usable.
    wanted = "/metrics?name[]=orchestrator_trackings_active"
    async with api.session.get(api.url + wanted) as resp:
        assert resp.status == 200
        assert "orchestrator_polls_total" not in await resp.text()
    for path, field in (
        ("/v1/trackings?limit=0", "limit"),
        ("/v1/trackings?state=bogus", "state"),
        ("/v1/events?after=x", "after"),
        ("/v1/deliveries?state=bogus", "state"),
    ):
        status, body = await api.call("GET", path)
        assert (status, body["field"]) == (422, field), (path, body)


async def test_a_post_route_refuses_an_unknown_parameter_too(api: Api) -> None:
    body = {"kind": "function_job", "remote_id": "J-1"}
    status, answer = await api.call("POST", "/v1/trackings?dry_run=1", json=body)
    assert (status, answer["field"]) == (422, "dry_run")
    status, page = await api.call("GET", "/v1/trackings")
    assert page["items"] == []  # nothing was tracked


def test_every_route_of_the_app_is_in_the_openapi_document() -> None:
    runtime = cast(Runtime, SimpleNamespace(settings=Settings(), metrics=Metrics()))
    app = create_app(runtime)
    documented = accepted_queries(build_openapi())
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }
    assert served - set(documented) == set()
