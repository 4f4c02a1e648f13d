"""The integer enums Moltaro serves, with the names its OpenAPI document carries."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class WireEnum:
    """One OpenAPI enum component: integer on the wire, names in ``x-enum-varnames``."""

    schema: str
    members: tuple[tuple[str, int], ...]
    _by_value: dict[int, str] = field(init=False, repr=False, compare=False)
    _by_name: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_value", {v: n for n, v in self.members})
        object.__setattr__(self, "_by_name", {n.lower(): v for n, v in self.members})

    def has(self, value: int) -> bool:
        return value in self._by_value

    def name(self, value: int) -> str:
        return self._by_value[value]

    def value(self, name: str) -> int:
        return self._by_name[name.lower()]

    def parse(self, raw: object) -> int | None:
        """The value named by an integer or a (case-insensitive) name; None if it is neither."""
        if isinstance(raw, bool):
            return None
        if isinstance(raw, int):
            return raw if raw in self._by_value else None
        if isinstance(raw, str):
            text = raw.strip()
            if text.lstrip("-").isdigit():
                return self.parse(int(text))
            return self._by_name.get(text.lower())
        return None

    def component(self) -> dict[str, object]:
        return {
            "type": "integer",
            "format": "int32",
            "enum": [v for _, v in self.members],
            "x-enum-varnames": [n for n, _ in self.members],
        }


def _enum(schema: str, *names: str | None) -> WireEnum:
    """Names in value order from 0; None skips a value the platform leaves unused."""
    return WireEnum(schema, tuple((n, i) for i, n in enumerate(names) if n is not None))


JOB_STATUS = _enum("FunctionJobStatus", "Queued", "Leased", "Completed", "Failed", "Cancelled")
RUN_STATUS = _enum(
    "FunctionRunStatus", "Running", "Success", "Failed", "Skipped", "Cancelled", "TimedOut"
)
NET_BUILD_STATUS = _enum(
    "NetOperationProjectBuildStatus", "Queued", "Running", "Succeeded", "Failed", "Cancelled"
)
UI_BUILD_STATUS = _enum(
    "WorkspaceUiBuildStatus", "Queued", "Running", "Succeeded", "Failed", "Cancelled"
)
NET_BUILD_KIND = _enum("NetOperationProjectBuildKind", "Build", "Check")
UI_BUILD_KIND = _enum("WorkspaceUiBuildKind", "Check", "Build")
CONTRACT = _enum(
    "BusinessFunctionContract",
    "Validation",
    "BeforeSaveMutation",
    "Action",
    "Job",
    None,  # 4: no member
    "TriggerHandler",
    "HttpEndpoint",
    "Command",
)
PUBLICATION_KIND = _enum("BusinessFunctionApiPublicationKind", "Command", "Enqueue")
BINDING_SOURCE = _enum("BusinessFunctionBindingSource", "EntitySave", "EntityTrigger")
JOB_SOURCE = _enum("FunctionJobSource", "Api", "Schedule", "Trigger", "Action", "Test", "FollowUp")
# A look-alike with other numbering that no status route references: the
# interpreter must read enums through the route's own schema, never by name.
LEGACY_JOB_STATE = _enum("LegacyJobState", "Pending", "Running", "Failed", "Completed", "Cancelled")

ALL_ENUMS = (
    JOB_STATUS,
    RUN_STATUS,
    NET_BUILD_STATUS,
    UI_BUILD_STATUS,
    NET_BUILD_KIND,
    UI_BUILD_KIND,
    CONTRACT,
    PUBLICATION_KIND,
    BINDING_SOURCE,
    JOB_SOURCE,
    LEGACY_JOB_STATE,
)

# Status values, named for readability in the lifecycle code.
QUEUED, LEASED, COMPLETED, FAILED, CANCELLED = range(5)
RUN_RUNNING, RUN_SUCCESS, RUN_FAILED, RUN_SKIPPED, RUN_CANCELLED, RUN_TIMED_OUT = range(6)
B_QUEUED, B_RUNNING, B_SUCCEEDED, B_FAILED, B_CANCELLED = range(5)
SRC_API, SRC_SCHEDULE, SRC_TRIGGER, SRC_ACTION, SRC_TEST, SRC_FOLLOW_UP = range(6)
