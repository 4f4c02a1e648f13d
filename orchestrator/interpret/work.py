"""The work a status body describes, for adaptive polling: its class (a function job's
FunctionKey, a build's build kind, ``Build`` or ``Check`` by name) and its own times:
created, and ended (a run's CompletedAt, else the body's CompletedAt, else its
ModifiedAt), so a learned duration does not include how late we read it. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.interpret._read import as_int, as_mapping, as_timestamp, get_ci
from orchestrator.vocabulary import BUILD_CLASSES, CLASS_RE, KINDS, Kind


@dataclass(frozen=True, slots=True)
class WorkTimes:
    work_class: str | None
    created_at: float | None  # wall
    ended_at: float | None  # wall; read on a terminal body


def work_times(kind: str, body: Any, kind_names: Mapping[int, str]) -> WorkTimes:
    """The class and times a status body shows (None for what it does not); a build's
    Kind given as a number is named by ``kind_names`` (its OpenAPI enum). Never raises."""
    model = as_mapping(body)
    if model is None:
        return WorkTimes(None, None, None)
    if get_ci(model, "Status") is None:
        model = as_mapping(get_ci(model, "Data")) or model
    created = as_timestamp(get_ci(model, "CreatedAt"))
    run = as_mapping(get_ci(model, "Run"))
    ended = (
        as_timestamp(get_ci(run, "CompletedAt"))
        or as_timestamp(get_ci(model, "CompletedAt"))
        or as_timestamp(get_ci(model, "ModifiedAt"))
    )
    if kind in KINDS and KINDS[Kind(kind)].class_field == "function_key":
        key = get_ci(model, "FunctionKey")
        cls = key if isinstance(key, str) and CLASS_RE.fullmatch(key) else None
    else:
        cls = build_kind(get_ci(model, "Kind"), kind_names)
    return WorkTimes(cls, created, ended)


def build_kind(raw: Any, kind_names: Mapping[int, str]) -> str | None:
    """``Build`` or ``Check`` from the body's Kind (a number through the enum, or a name)."""
    number = as_int(raw)
    name = kind_names.get(number) if number is not None else raw
    if not isinstance(name, str):
        return None
    folded = name.strip().casefold()
    return next((k for k in BUILD_CLASSES if k.casefold() == folded), None)
