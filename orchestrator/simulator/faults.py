"""Fault rules per route and id (``PUT /_sim/faults``), decided by the seeded random."""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

ROUTES = frozenset(
    {
        "job_status",
        "job_cancel",
        "job_enqueue",
        "build_status",
        "build_submit",
        "openapi",
        "admin",
        "*",
    }
)
KINDS = frozenset(
    {"latency", "http_5xx", "rate_limited", "unavailable", "reset", "malformed", "not_found"}
)
_DEFAULTS: dict[str, Any] = {
    "id": None,
    "ratio": 1.0,
    "status": 500,
    "latency_s": 0.0,
    "retry_after_s": 2,
    "retry_after_format": "seconds",
    "start_s": 0,
    "end_s": None,
    "max_hits": None,
}


class FaultRuleError(ValueError):
    """A fault rule is not valid (answered 400)."""


@dataclass(slots=True)
class FaultRule:
    route: str
    fault: str
    id: str | None
    ratio: float
    status: int
    latency_s: float
    retry_after_s: float
    retry_after_format: str
    start_s: float
    end_s: float | None
    max_hits: int | None
    hits: int = 0

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("route", "fault", *_DEFAULTS, "hits")}

    def retry_after(self, now: float) -> str:
        if self.retry_after_format == "http_date":
            return formatdate(now + self.retry_after_s, usegmt=True)
        return str(round(self.retry_after_s))


def _num(raw: dict[str, Any], key: str, lo: float, hi: float, n: int) -> float:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise FaultRuleError(f"rules[{n}].{key} must be a number in [{lo}, {hi}]")
    return float(value)


def parse_rules(body: object) -> list[FaultRule]:
    if not isinstance(body, dict) or not isinstance(body.get("rules"), list):
        raise FaultRuleError('the body is {"rules": [rule, ...]}')
    rules = []
    for n, item in enumerate(body["rules"]):
        if not isinstance(item, dict):
            raise FaultRuleError(f"rules[{n}] must be an object")
        unknown = set(item) - {"route", "fault", *_DEFAULTS}
        if unknown:
            raise FaultRuleError(f"rules[{n}]: unknown field {sorted(unknown)[0]!r}")
        raw = {**_DEFAULTS, "route": "*", **item}
        if raw["route"] not in ROUTES:
            raise FaultRuleError(f"rules[{n}].route must be one of {sorted(ROUTES)}")
        if raw.get("fault") not in KINDS:
            raise FaultRuleError(f"rules[{n}].fault must be one of {sorted(KINDS)}")
        if raw["id"] is not None and not isinstance(raw["id"], str):
            raise FaultRuleError(f"rules[{n}].id must be a string or null")
        if raw["retry_after_format"] not in ("seconds", "http_date"):
            raise FaultRuleError(f'rules[{n}].retry_after_format is "seconds" or "http_date"')
        status = _num(raw, "status", 100, 599, n)
        end = None if raw["end_s"] is None else _num(raw, "end_s", 0, 1e9, n)
        hits = raw["max_hits"]
        if hits is not None and (isinstance(hits, bool) or not isinstance(hits, int) or hits < 0):
            raise FaultRuleError(f"rules[{n}].max_hits must be a non-negative integer or null")
        rules.append(
            FaultRule(
                route=raw["route"],
                fault=raw["fault"],
                id=raw["id"],
                ratio=_num(raw, "ratio", 0, 1, n),
                status=int(status),
                latency_s=_num(raw, "latency_s", 0, 600, n),
                retry_after_s=_num(raw, "retry_after_s", 0, 86400, n),
                retry_after_format=raw["retry_after_format"],
                start_s=_num(raw, "start_s", 0, 1e9, n),
                end_s=end,
                max_hits=hits,
            )
        )
    return rules


class FaultBook:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rules: list[FaultRule] = []
        self.set_at = 0.0

    def replace(self, rules: list[FaultRule], now: float) -> None:
        self.rules = rules
        self.set_at = now

    def decide(self, route: str, rid: str | None, now: float) -> list[FaultRule]:
        """The rules that fire for this request: any latency first, then at most one fault."""
        fired: list[FaultRule] = []
        elapsed = now - self.set_at
        for rule in self.rules:
            if rule.route != "*" and rule.route != route:
                continue
            if rule.id is not None and rule.id != rid:
                continue
            if elapsed < rule.start_s or (rule.end_s is not None and elapsed >= rule.end_s):
                continue
            if rule.max_hits is not None and rule.hits >= rule.max_hits:
                continue
            if rule.ratio < 1.0 and self.rng.random() >= rule.ratio:
                continue
            rule.hits += 1
            fired.append(rule)
            if rule.fault != "latency":
                break
        return fired
