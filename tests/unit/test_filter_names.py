"""The list routes' filter names, read from an OpenAPI document: pure."""

from __future__ import annotations

from typing import Any

from orchestrator.config import WorkspacePaths
from orchestrator.interpret.filters import (
    DOCUMENTED,
    fallback_filter_names,
    fold,
    resolve_filter_names,
)
from orchestrator.simulator.openapi import build_document
from orchestrator.simulator.profiles import builtin_profiles

ROUTES = {
    "function_jobs": WorkspacePaths().function_jobs,
    "function_runs": WorkspacePaths().function_runs,
}
JOBS = WorkspacePaths().function_jobs


def doc(params: list[Any], **components: Any) -> dict[str, Any]:
    return {
        "paths": {JOBS: {"get": {"parameters": params, "responses": {}}}},
        "components": {"parameters": components},
    }


def test_the_documented_names_when_the_document_is_read() -> None:
    names = resolve_filter_names(build_document(), ROUTES)
    assert names.fallback == frozenset()
    for route in ROUTES:
        assert names.name(route, "trigger_binding_id") == "TriggerBindingId"
        assert names.declared(route, "search") and not names.declared(route, "user_id")
        assert names.undeclared(route) == ["user_id"]


def test_a_renamed_installation_is_read_per_route() -> None:
    renamed = builtin_profiles()["renamed"].filter_names
    names = resolve_filter_names(build_document(renamed), ROUTES)
    assert names.name("function_jobs", "from") == "createdFrom"
    assert names.name("function_runs", "from") == "startedFrom"
    assert names.name("function_jobs", "schedule_id") == "Filter.ScheduleId"
    assert names.name("function_jobs", "limit") == "pageSize"
    assert names.query("function_jobs", {"entity_id": "e", "to": "t"}) == {
        "recordId": "e",
        "createdTo": "t",
    }
    assert not names.declared("function_jobs", "search")
    assert "search" in names.undeclared("function_runs")


def test_parameters_by_reference_path_level_and_not_in_the_query() -> None:
    params = [
        {"$ref": "#/components/parameters/Binding"},
        {"name": "entityId", "in": "query"},
        {"name": "ActionId", "in": "path"},  # not a query parameter
        {"name": "Unrelated", "in": "query"},
    ]
    names = resolve_filter_names(doc(params, Binding={"name": "binding_id", "in": "query"}), ROUTES)
    assert names.name("function_jobs", "trigger_binding_id") == "binding_id"
    assert names.name("function_jobs", "entity_id") == "entityId"
    assert not names.declared("function_jobs", "action_id")
    # The runs route is not in this document: its names are the documented fallback.
    assert names.fallback == frozenset({"function_runs"})
    assert names.declared("function_runs", "action_id")
    assert names.reason and "function-operations/runs" in names.reason


def test_the_documented_spelling_wins_over_an_alias() -> None:
    params = [{"name": "since", "in": "query"}, {"name": "From", "in": "query"}]
    assert resolve_filter_names(doc(params), ROUTES).name("function_jobs", "from") == "From"


def test_no_document_is_the_fallback_everywhere() -> None:
    for names in (resolve_filter_names(None, ROUTES), fallback_filter_names("unreachable")):
        assert names.fallback == frozenset(ROUTES)
        assert all(names.name(r, w) == n for r in ROUTES for w, n in DOCUMENTED.items())
        assert all(names.declared(r, w) for r in ROUTES for w in DOCUMENTED)
        assert names.to_json()["function_jobs"]["source"] == "fallback"


def test_fold() -> None:
    assert fold("Filter.TriggerBindingId") == fold("trigger_binding_id") == "triggerbindingid"
    assert fold("page-size") == "pagesize"
