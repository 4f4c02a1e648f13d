"""Enum values of a status route, read from the workspace's OpenAPI document.

The installed document is the truth (CONTRACT §2): find the route by its shape,
follow the GET 200 response schema through ``$ref`` and ``allOf``/``oneOf``/
``anyOf`` into its properties, and pair each integer ``enum`` with its
``x-enum-varnames``. Only the route's own schema is walked, so look-alike enums
elsewhere in the document never leak in. The platform documentation's printed
values are the fallback when no document can be had. The catalog's enums
(``resolve_platform_enums``) are found the same way, through the list route
that serves each, with the same documented fallback (``source: "fallback"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from orchestrator.errors import EnumResolutionError
from orchestrator.interpret._read import get_ci
from orchestrator.interpret.interpreter import BUILD_STATUSES, JOB_STATUSES, EnumMap
from orchestrator.vocabulary import STATUS_KINDS, Kind

_FALLBACK: dict[str, dict[str, dict[int, str]]] = {
    Kind.FUNCTION_JOB: {"status": dict(enumerate(JOB_STATUSES))},
    Kind.NET_OPERATION_BUILD: {
        "status": dict(enumerate(BUILD_STATUSES)),
        "kind": {0: "Build", 1: "Check"},
    },
    Kind.WORKSPACE_UI_BUILD: {
        "status": dict(enumerate(BUILD_STATUSES)),
        "kind": {0: "Check", 1: "Build"},
    },
}

CONTRACT = "BusinessFunctionContract"
PUBLICATION_KIND = "BusinessFunctionApiPublicationKind"
BINDING_SOURCE = "BusinessFunctionBindingSource"
# The catalog enums' values the platform documentation prints for the current contract.
CATALOG_DOCUMENTED: dict[str, dict[int, str]] = {
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
# Which route (a WorkspacePaths key) and which row property carries each catalog enum.
CATALOG_WHERE: dict[str, tuple[str, str]] = {
    CONTRACT: ("function_catalog", "CurrentPublishedContract"),
    PUBLICATION_KIND: ("api_functions", "Kind"),
    BINDING_SOURCE: ("binding_summaries", "Source"),
}

_COMBINATORS = ("allOf", "oneOf", "anyOf")
_NAME_KEYS = ("x-enum-varnames", "x-enumNames")
_JSON_TYPES = ("application/json", "text/json")
# Bounds on the walk: a generated document is a few levels deep; anything past
# these is hostile or broken, and stopping early only loses enums, never raises.
_MAX_DEPTH = 32
_MAX_NODES = 20_000


def fallback_enums(kind: str) -> EnumMap:
    """The values printed in the platform documentation (no run status among them).

    Raises ValueError for a kind that is not one of ``STATUS_KINDS``.
    """
    if kind not in _FALLBACK:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(STATUS_KINDS)}")
    return EnumMap({path: dict(m) for path, m in _FALLBACK[kind].items()}, source="fallback")


def resolve_enums(document: Any, route_template: str) -> EnumMap:
    """Every integer enum of the route's GET 200 model, by lower-cased dotted path.

    Raises EnumResolutionError when the document has no such route, the route has
    no 200 schema, or no enum is found for ``status``.
    """
    schema = _route_schema(document, route_template)
    walker = _Walker(document)
    props = walker.properties(schema, frozenset(), 0)
    if "status" not in props and "data" in props:  # the model inside a {Succeeded, Data} envelope
        schema = props["data"]
    walker.collect(schema, "", frozenset(), 0)
    if "status" not in walker.found:
        raise EnumResolutionError(
            f"OpenAPI schema of GET {route_template} has no enum with x-enum-varnames for Status"
        )
    return EnumMap(values=walker.found, source="openapi")


def _route_schema(document: Any, route_template: str) -> Any:
    """The GET 200 response schema of the route; EnumResolutionError when there is none."""
    if not isinstance(document, Mapping):
        raise EnumResolutionError("OpenAPI document is not a JSON object")
    operation = get_ci(_deref(document, _find_path(document, route_template)), "get")
    if not isinstance(operation, Mapping):
        raise EnumResolutionError(f"OpenAPI document has no GET operation for {route_template}")
    schema = _success_schema(document, operation)
    if schema is None:
        raise EnumResolutionError(
            f"OpenAPI document has no 200 response schema for GET {route_template}"
        )
    return schema


def _find_path(document: Mapping[str, Any], route_template: str) -> Any:
    paths = document.get("paths")
    if not isinstance(paths, Mapping):
        raise EnumResolutionError("OpenAPI document has no paths")
    wanted = _segments(route_template)
    prefixes = list(_base_paths(document))
    # Literal segments compare exactly first; ASP.NET routes are case-insensitive,
    # so a case-only difference is the second choice, never ahead of an exact one.
    for fold in (False, True):
        for key, item in paths.items():
            if not isinstance(key, str):
                continue
            for prefix in prefixes:
                if _same_shape(_segments(prefix + key), wanted, fold):
                    return item
    raise EnumResolutionError(f"OpenAPI document has no path matching {route_template}")


def _base_paths(document: Mapping[str, Any]) -> Iterator[str]:
    """The empty prefix, then any the document declares (Swagger 2 basePath, 3.x servers)."""
    yield ""
    base = document.get("basePath")
    if isinstance(base, str) and base.strip("/"):
        yield "/" + base.strip("/")
    servers = document.get("servers")
    if isinstance(servers, list):
        for server in servers:
            url = server.get("url") if isinstance(server, Mapping) else None
            if isinstance(url, str):
                try:
                    path = urlsplit(url).path.strip("/")
                except ValueError:
                    continue
                if path:
                    yield "/" + path


def _segments(path: str) -> list[str]:
    return path.strip().rstrip("/").split("/")


def _same_shape(have: list[str], want: list[str], fold: bool) -> bool:
    if len(have) != len(want):
        return False
    for a, b in zip(have, want, strict=True):
        if _is_param(a) != _is_param(b):
            return False
        if not _is_param(a) and a != b and not (fold and a.lower() == b.lower()):
            return False
    return True


def _is_param(segment: str) -> bool:
    return len(segment) > 2 and segment.startswith("{") and segment.endswith("}")


def _success_schema(document: Mapping[str, Any], operation: Mapping[str, Any]) -> Any:
    responses = operation.get("responses")
    if not isinstance(responses, Mapping):
        return None
    found = (responses.get(code) for code in ("200", 200, "2XX", "2xx"))
    response = _deref(document, next((r for r in found if r is not None), None))
    if not isinstance(response, Mapping):
        return None
    if "schema" in response:  # Swagger 2
        return response["schema"]
    content = response.get("content")
    if not isinstance(content, Mapping):
        return None
    media = _pick_media(content)
    return media.get("schema") if media is not None else None


def _pick_media(content: Mapping[str, Any]) -> Mapping[str, Any] | None:
    with_schema = [
        (str(name).split(";")[0].strip().lower(), value)
        for name, value in content.items()
        if isinstance(value, Mapping) and value.get("schema") is not None
    ]
    for wanted in _JSON_TYPES:
        for name, value in with_schema:
            if name == wanted:
                return value
    return with_schema[0][1] if with_schema else None


def _deref(document: Mapping[str, Any], node: Any) -> Mapping[str, Any] | None:
    """Follow a chain of local ``$ref``s; None on a cycle or a reference that goes nowhere."""
    return _resolve(document, node, frozenset())[0]


def _resolve(
    document: Mapping[str, Any], schema: Any, active: frozenset[str]
) -> tuple[Mapping[str, Any] | None, frozenset[str]]:
    """The schema behind a chain of refs, and the refs now being expanded.

    ``active`` holds only the refs on the current path from the root, so one
    enum schema shared by two properties is still read at both paths.
    """
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref in active:
            return None, active
        active = active | {ref}
        schema = _pointer(document, ref)
    return (schema if isinstance(schema, Mapping) else None), active


def _pointer(document: Mapping[str, Any], ref: str) -> Any:
    """The target of a local JSON pointer (``#/components/schemas/X``, ``#/definitions/X``)."""
    if not ref.startswith("#/"):
        return None  # external documents are never fetched
    node: Any = document
    for raw in ref[2:].split("/"):
        token = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


class _Walker:
    """Collects enums from one schema tree, guarded against cycles and blow-up."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.found: dict[str, dict[int, str]] = {}
        self.budget = _MAX_NODES

    def properties(self, schema: Any, active: frozenset[str], depth: int) -> dict[str, Any]:
        """Property schemas by lower-cased name, merged through refs and combinators."""
        node, active = _resolve(self.document, schema, active)
        merged: dict[str, Any] = {}
        if node is None or depth > _MAX_DEPTH:
            return merged
        props = node.get("properties")
        if isinstance(props, Mapping):
            for name, sub in props.items():
                if isinstance(name, str):
                    merged.setdefault(name.lower(), sub)
        for key in _COMBINATORS:
            members = node.get(key)
            if isinstance(members, list):
                for member in members:
                    for name, sub in self.properties(member, active, depth + 1).items():
                        merged.setdefault(name, sub)
        return merged

    def collect(self, schema: Any, path: str, active: frozenset[str], depth: int) -> None:
        if self.budget <= 0 or depth > _MAX_DEPTH:
            return
        self.budget -= 1
        node, active = _resolve(self.document, schema, active)
        if node is None:
            return
        values = _enum_values(node)
        if values and path:
            self.found.setdefault(path, values)
        for key in _COMBINATORS:
            members = node.get(key)
            if isinstance(members, list):
                for member in members:
                    self.collect(member, path, active, depth + 1)
        props = node.get("properties")
        if isinstance(props, Mapping):
            for name, sub in props.items():
                if isinstance(name, str) and name:
                    child = f"{path}.{name.lower()}" if path else name.lower()
                    self.collect(sub, child, active, depth + 1)


def _enum_values(node: Mapping[str, Any]) -> dict[int, str] | None:
    raw = node.get("enum")
    if not isinstance(raw, list) or not raw:
        return None
    names = next((node[k] for k in _NAME_KEYS if isinstance(node.get(k), list)), None)
    if names is None:
        return None
    # A nullable enum may list null among its values, with or without a name for it.
    values = raw if len(raw) == len(names) else [v for v in raw if v is not None]
    if len(values) != len(names):
        return None
    result: dict[int, str] = {}
    for value, name in zip(values, names, strict=True):
        if value is None:
            continue
        integer = isinstance(value, int) and not isinstance(value, bool)
        if not integer or not isinstance(name, str) or not name.strip():
            return None
        result.setdefault(value, name.strip())
    return result or None


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


def catalog_fallback(name: str, reason: str) -> PlatformEnum:
    return PlatformEnum(name, dict(CATALOG_DOCUMENTED[name]), "fallback", reason)


def resolve_platform_enums(
    document: Any, routes: Mapping[str, str], unavailable: str | None = None
) -> dict[str, PlatformEnum]:
    """Every catalog enum, from ``document`` (None when it could not be had).

    ``routes`` maps WorkspacePaths keys to the configured templates;
    ``unavailable`` says why there is no document.
    """
    out: dict[str, PlatformEnum] = {}
    for name, (route_key, prop) in CATALOG_WHERE.items():
        try:
            if document is None:
                raise EnumResolutionError(unavailable or "OpenAPI document unavailable")
            values = route_property_enum(document, routes[route_key], prop)
            out[name] = PlatformEnum(name, values, "openapi")
        except EnumResolutionError as exc:
            out[name] = catalog_fallback(name, str(exc))
    return out


def route_property_enum(document: Any, route_template: str, prop: str) -> dict[int, str]:
    """The enum of one property of a GET route's rows (a page's Items, or the model).

    Raises EnumResolutionError when the route, its 200 schema, the property or
    an enum with ``x-enum-varnames`` for it is missing.
    """
    schema = _route_schema(document, route_template)
    walker = _Walker(document)
    props = walker.properties(schema, frozenset(), 0)
    if prop.lower() not in props and "items" in props:
        page_items = _deref(document, props["items"])
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
