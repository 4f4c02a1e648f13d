"""What a status body says of the work's class and times, for adaptive polling. Pure.

The class is the work's FunctionKey for a function job and its build kind
(``Build`` or ``Check``, by name) for a build, whose kind already names the
project type. The times are the work's own: created, and ended (a run's
CompletedAt, else the body's CompletedAt, else its ModifiedAt on a terminal
body), so a learned duration does not include how late we read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orchestrator.interpret import EnumMap
from orchestrator.interpret._read import as_int, as_mapping, as_timestamp, get_ci
from orchestrator.vocabulary import BUILD_CLASSES

# A class becomes a metric label value: printable, short, no spaces.
CLASS_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")


@dataclass(frozen=True, slots=True)
class WorkTimes:
    work_class: str | None
    created_at: float | None
    ended_at: float | None


def work_times(kind: str, body: Any, enums: EnumMap) -> WorkTimes:
    """The class and times a status body shows (None for what it does not). Never raises."""
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
    if kind == "function_job":
        key = get_ci(model, "FunctionKey")
        cls = key if isinstance(key, str) and CLASS_RE.fullmatch(key) else None
    else:
        cls = build_kind(get_ci(model, "Kind"), enums)
    return WorkTimes(cls, created, ended)


def build_kind(raw: Any, enums: EnumMap) -> str | None:
    """``Build`` or ``Check`` from the body's Kind (a number through the enum map, or a name)."""
    number = as_int(raw)
    name = enums.values.get("kind", {}).get(number) if number is not None else raw
    if not isinstance(name, str):
        return None
    folded = name.strip().casefold()
    return next((k for k in BUILD_CLASSES if k.casefold() == folded), None)
