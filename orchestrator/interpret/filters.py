"""The Function operations list routes' filter parameter names, read from OpenAPI: pure.

The platform documentation says to filter "as declared by the installed
OpenAPI document", so the query names we send are the ones each list route
declares. A declared parameter is matched to one of our filters by its name,
folded (case, separators and a ``Filter.`` prefix of a bound model dropped)
and compared with a few spellings each filter is known by. When there is no
document the documented names are used (``source: "fallback"``); when the
document was read but a route does not declare a filter, ``declared`` says so
and the documented name is only a last resort (the route may ignore it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import EnumResolutionError
from orchestrator.interpret._read import get_ci
from orchestrator.interpret.enums import _deref, _find_path

# Our filter -> the name the platform documentation gives it (CONTRACT section 8).
DOCUMENTED: dict[str, str] = {
    "trigger_binding_id": "TriggerBindingId",
    "action_id": "ActionId",
    "entity_id": "EntityId",
    "user_id": "UserId",
    "search": "Search",
    "from": "From",
    "to": "To",
    "status": "Status",
    "source": "Source",
    "schedule_id": "ScheduleId",
    "function_id": "FunctionId",
    "limit": "Limit",
}

# Other spellings of each filter, folded; the documented name always matches.
_ALIASES: dict[str, tuple[str, ...]] = {
    "trigger_binding_id": ("bindingid", "triggerbinding", "entitytriggerbindingid"),
    "action_id": ("uiactionid", "action"),
    "entity_id": ("recordid", "entityrecordid", "entity"),
    "user_id": ("user", "actoruserid", "requestedbyuserid"),
    "search": ("q", "query", "term", "searchtext", "searchterm"),
    "from": ("since", "createdfrom", "startedfrom", "fromutc", "createdafter", "startedafter"),
    "to": ("until", "createdto", "startedto", "toutc", "createdbefore", "startedbefore"),
    "status": ("jobstatus", "runstatus", "state"),
    "source": ("jobsource", "runsource"),
    "schedule_id": ("schedule", "functionscheduleid"),
    "function_id": ("businessfunctionid", "function", "functionkey"),
    "limit": ("pagesize", "take", "top", "maxresults"),
}

ROUTES = ("function_jobs", "function_runs")


def fold(name: str) -> str:
    """A parameter name without case, separators or a bound model's ``filter`` prefix."""
    folded = re.sub(r"[^a-z0-9]", "", name.lower())
    if name.lower().startswith(("filter.", "filter[")):
        folded = folded.removeprefix("filter")
    return folded


_BY_FOLDED: dict[str, str] = {}
for _filter, _name in DOCUMENTED.items():
    for _spelling in (fold(_name), *_ALIASES[_filter]):
        _BY_FOLDED.setdefault(_spelling, _filter)


@dataclass(frozen=True, slots=True)
class FilterNames:
    """Per list route (a WorkspacePaths key), our filter -> the query name to send.

    ``fallback`` holds the routes whose names are the documented ones because
    the document could not be had or does not describe the route; every filter
    counts as declared there (nothing says otherwise).
    """

    names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    fallback: frozenset[str] = frozenset(ROUTES)
    reason: str | None = None  # why the documented names are in force somewhere

    def name(self, route: str, what: str) -> str:
        """The query name for ``what`` on ``route``; the documented one if undeclared."""
        return self.names.get(route, {}).get(what, DOCUMENTED[what])

    def declared(self, route: str, what: str) -> bool:
        """False only when the document describes ``route`` without declaring ``what``."""
        return route in self.fallback or what in self.names.get(route, {})

    def undeclared(self, route: str) -> list[str]:
        """Our filters the document describes ``route`` without (none on fallback)."""
        return [what for what in DOCUMENTED if not self.declared(route, what)]

    def query(self, route: str, filters: Mapping[str, str]) -> dict[str, str]:
        """``filters`` (our names) as the route's query parameters."""
        return {self.name(route, what): value for what, value in filters.items()}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            route: {
                "source": "fallback" if route in self.fallback else "openapi",
                "names": {what: self.name(route, what) for what in DOCUMENTED},
                "undeclared": self.undeclared(route),
            }
            for route in ROUTES
        }
        if self.reason is not None:
            out["fallback_reason"] = self.reason
        return out


def fallback_filter_names(reason: str) -> FilterNames:
    """The documented names, for every route (the document could not be had)."""
    return FilterNames({route: dict(DOCUMENTED) for route in ROUTES}, frozenset(ROUTES), reason)


def resolve_filter_names(document: Any, routes: Mapping[str, str]) -> FilterNames:
    """Each list route's declared filters, from its GET operation's query parameters.

    ``routes`` maps WorkspacePaths keys (``function_jobs``, ``function_runs``) to
    the configured templates. A route the document lacks keeps the documented names.
    """
    if not isinstance(document, Mapping):
        return fallback_filter_names("OpenAPI document is not a JSON object")
    names: dict[str, dict[str, str]] = {}
    fallback: set[str] = set()
    why: list[str] = []
    for route in ROUTES:
        try:
            names[route] = _declared(document, routes[route])
        except EnumResolutionError as exc:
            names[route] = dict(DOCUMENTED)
            fallback.add(route)
            why.append(str(exc))
    return FilterNames(names, frozenset(fallback), "; ".join(why) or None)


def _declared(document: Mapping[str, Any], template: str) -> dict[str, str]:
    item = _deref(document, _find_path(document, template))
    get = get_ci(item, "get")
    if not isinstance(get, Mapping):
        raise EnumResolutionError(f"OpenAPI document has no GET operation for {template}")
    params: list[Any] = []
    for node in (item, get):
        listed = get_ci(node, "parameters")
        if isinstance(listed, list):
            params.extend(listed)
    found: dict[str, str] = {}
    for raw in params:
        param = _deref(document, raw)
        if not isinstance(param, Mapping) or str(param.get("in", "")).lower() != "query":
            continue
        name = param.get("name")
        if not isinstance(name, str) or not name:
            continue
        what = _BY_FOLDED.get(fold(name))
        # The documented spelling wins over an alias that happens to be declared too.
        if what is not None and (what not in found or fold(name) == fold(DOCUMENTED[what])):
            found[what] = name
    return found
