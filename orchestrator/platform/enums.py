"""The catalog's enums, read from the installed OpenAPI document.

Each enum is found through the schema of the route that serves it (the
catalog, binding-summary and API-function list routes), never by its component
name alone, so a look-alike elsewhere in the document cannot leak in. When the
document or the route does not say, the values printed in the platform
documentation are used and the answer says so (``source: "fallback"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.errors import EnumResolutionError

# The walk over $ref/allOf and the route lookup are the interpreter's; sharing
# them keeps one definition of "the route's own schema" in the code base.
from orchestrator.interpret.enums import _find_path, _success_schema, _Walker

CONTRACT = "BusinessFunctionContract"
PUBLICATION_KIND = "BusinessFunctionApiPublicationKind"
BINDING_SOURCE = "BusinessFunctionBindingSource"

# The values the platform documentation prints for the current contract.
DOCUMENTED: dict[str, dict[int, str]] = {
    CONTRACT: {
        0: "Validation",
        1: "BeforeSaveMutation",
        2: "Action",
        3: "Job",
        5: "TriggerHandler",
        6: "HttpEndpoint",
        7: "Command",
    },
    PUBLICATION_KIND: {0: "Command", 1: "Enqueue"},
    BINDING_SOURCE: {0: "EntitySave", 1: "EntityTrigger"},
}

# Which route (a WorkspacePaths key) and which row property carries each enum.
WHERE: dict[str, tuple[str, str]] = {
    CONTRACT: ("function_catalog", "CurrentPublishedContract"),
    PUBLICATION_KIND: ("api_functions", "Kind"),
    BINDING_SOURCE: ("binding_summaries", "Source"),
}


@dataclass(frozen=True, slots=True)
class PlatformEnum:
    name: str
    values: Mapping[int, str]
    source: Literal["openapi", "fallback"]
    reason: str | None = None  # why the fallback is in force

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "values": {name: value for value, name in sorted(self.values.items())},
        }
        if self.reason is not None:
            out["fallback_reason"] = self.reason
        return out


def fallback(name: str, reason: str) -> PlatformEnum:
    return PlatformEnum(name, dict(DOCUMENTED[name]), "fallback", reason)


def resolve_platform_enums(
    document: Any, routes: Mapping[str, str], unavailable: str | None = None
) -> dict[str, PlatformEnum]:
    """Every catalog enum, from ``document`` (None when it could not be had).

    ``routes`` maps WorkspacePaths keys to the configured templates;
    ``unavailable`` says why there is no document.
    """
    out: dict[str, PlatformEnum] = {}
    for name, (route_key, prop) in WHERE.items():
        if document is None:
            out[name] = fallback(name, unavailable or "OpenAPI document unavailable")
            continue
        try:
            values = route_property_enum(document, routes[route_key], prop)
        except EnumResolutionError as exc:
            out[name] = fallback(name, str(exc))
            continue
        out[name] = PlatformEnum(name, values, "openapi")
    return out


def route_property_enum(document: Any, route_template: str, prop: str) -> dict[int, str]:
    """The enum of one property of a GET route's rows (a page's Items, or the model).

    Raises EnumResolutionError when the route, its 200 schema, the property or
    an enum with ``x-enum-varnames`` for it is missing.
    """
    if not isinstance(document, Mapping):
        raise EnumResolutionError("OpenAPI document is not a JSON object")
    item = _find_path(document, route_template)
    walker = _Walker(document)
    operation, _ = walker.resolve(item, frozenset())
    get = None if operation is None else operation.get("get")
    if not isinstance(get, Mapping):
        raise EnumResolutionError(f"OpenAPI document has no GET operation for {route_template}")
    schema = _success_schema(document, get)
    if schema is None:
        raise EnumResolutionError(f"no 200 response schema for GET {route_template}")
    props = walker.properties(schema, frozenset(), 0)
    if prop.lower() not in props and "items" in props:
        page_items, _ = walker.resolve(props["items"], frozenset())
        if page_items is not None and page_items.get("items") is not None:
            props = walker.properties(page_items["items"], frozenset(), 0)
    target = props.get(prop.lower())
    if target is None:
        raise EnumResolutionError(f"GET {route_template} rows have no property {prop}")
    walker.collect(target, "value", frozenset(), 0)
    values = walker.found.get("value")
    if not values:
        raise EnumResolutionError(
            f"{prop} of GET {route_template} has no enum with x-enum-varnames"
        )
    return dict(values)
