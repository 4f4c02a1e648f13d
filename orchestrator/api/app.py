"""The aiohttp application: routes, middlewares, health, metrics, OpenAPI."""

from __future__ import annotations

import orjson
from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from orchestrator.aio import bounded
from orchestrator.api.events_routes import add_event_routes
from orchestrator.api.groups import routes as group_routes
from orchestrator.api.openapi import build_openapi
from orchestrator.api.problems import auth_middleware, problem_middleware
from orchestrator.api.query import accepted_queries, query_middleware
from orchestrator.api.trackings import routes as tracking_routes
from orchestrator.runtime import RUNTIME, Runtime

# Readiness asks the store, and answers whatever the store does: a probe a hung
# database link holds is not ready (an orchestrator can then see and replace us).
# Within a 1 s probe, and long enough for a database 300 ms away each way: slow is
# not down.
READY_STORE_BOUND_S = 0.8


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    loading = rt.loading
    if loading is not None and not loading.done and not rt.draining:
        # Alive and taking intake, not yet polling everything it holds.
        rt.metrics.ready.set(0)
        body = {
            "status": "loading",
            "reasons": ["loading active trackings"],
            "loaded": loading.loaded,
            "total": loading.total,
        }
        return web.json_response(body, status=503)
    reasons = []
    if rt.draining:
        reasons.append("draining")
    if rt.failed_tasks:
        reasons.append("failed tasks: " + ", ".join(rt.failed_tasks))
    if not reasons:  # then the store must take a write within the bound
        try:
            if not await bounded(rt.store.check_writable(), READY_STORE_BOUND_S):
                reasons.append("store not writable")
        except TimeoutError:
            reasons.append(f"store did not answer within {READY_STORE_BOUND_S:g} s")
    rt.metrics.ready.set(0 if reasons else 1)
    replica = rt.replica.describe() if rt.replica is not None else {}
    if reasons:
        body = {"status": "not ready", "reasons": reasons, **replica}
        return web.json_response(body, status=503)
    return web.json_response({"status": "ready", **replica})


def create_app(runtime: Runtime) -> web.Application:
    spec = build_openapi()
    # After the token check: an unauthenticated caller learns nothing of the query rules.
    refuse_unknown_query = query_middleware(accepted_queries(spec))
    app = web.Application(
        middlewares=[problem_middleware, auth_middleware, refuse_unknown_query],
        client_max_size=runtime.settings.server.max_body_bytes,
    )
    app[RUNTIME] = runtime
    app.add_routes(tracking_routes)
    app.add_routes(group_routes)
    add_event_routes(app)
    document = orjson.dumps(spec)

    async def openapi(request: web.Request) -> web.Response:
        return web.Response(body=document, content_type="application/json")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/openapi.json", openapi)
    app.router.add_get("/metrics", make_aiohttp_handler(runtime.metrics.registry))
    return app
