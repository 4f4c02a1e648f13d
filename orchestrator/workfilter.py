"""The filter that names work found by filter (kinds ``trigger_work``, ``action_work``).

Such work has no id the caller was handed, so its tracking is stored under a
key made of the filter itself: the store's (workspace, kind, remote_id)
uniqueness then makes the same filter, tracked twice, the same tracking. The
key holds the filter fields and the caller's ``since`` (or none), nothing else:
``expect_jobs`` and the ``since`` in force travel in the tracking's stored
``remote`` instead. This module imports nothing of the project but the
vocabulary, so the API, the resource and the kind handler share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

KEY_PREFIX = "filter:"
FIELDS = ("trigger_binding_id", "entity_id", "filter_correlation_id", "action_id", "job_id")


@dataclass(frozen=True, slots=True)
class WorkFilter:
    trigger_binding_id: str | None = None
    entity_id: str | None = None
    filter_correlation_id: str | None = None
    action_id: str | None = None
    job_id: str | None = None
    since: str | None = None  # the caller's (RFC 3339, normalised); None: the default

    def fields(self) -> dict[str, str]:
        """The filter fields given, by intake name."""
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}

    def key(self) -> str:
        """The stored remote_id: canonical, so equal filters give equal keys."""
        return KEY_PREFIX + orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def from_key(cls, key: str) -> WorkFilter | None:
        if not key.startswith(KEY_PREFIX):
            return None
        try:
            parts = orjson.loads(key[len(KEY_PREFIX) :])
        except orjson.JSONDecodeError:
            return None
        return cls.from_json(parts)

    @classmethod
    def from_json(cls, raw: Any) -> WorkFilter | None:
        if not isinstance(raw, Mapping):
            return None
        values = {name: raw.get(name) for name in (*FIELDS, "since")}
        if not all(v is None or isinstance(v, str) for v in values.values()):
            return None
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return {**self.fields(), "since": self.since}


def is_filter_key(remote_id: str) -> bool:
    return remote_id.startswith(KEY_PREFIX)


def shown_id(remote_id: str) -> str | None:
    """The remote id a result shows: none for a filter's key (it names no remote resource)."""
    return None if is_filter_key(remote_id) else remote_id
