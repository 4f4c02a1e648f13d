"""What a chaos run found: counted against the scripted truth, as JSON and as a table."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ChaosReport:
    trackings: int = 0
    faults_injected: dict[str, int] = field(default_factory=dict)
    kills_survived: int = 0
    hostile_inputs_tried: int = 0
    hostile_inputs_accepted_wrongly: int = 0
    terminal_by_outcome: dict[str, int] = field(default_factory=dict)
    # Every figure below must be 0.
    trackings_lost: int = 0
    false_terminals: int = 0
    two_terminal_ids_feed: int = 0
    two_terminal_ids_sink: int = 0
    terminal_missing_in_feed: int = 0
    terminal_missing_at_sink: int = 0
    terminal_events_without_tracking: int = 0
    bad_signatures: int = 0
    secrets_leaked: int = 0
    # Informative.
    sink_redeliveries: int = 0
    sink_refusals: int = 0
    feed_events: int = 0
    notes: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    MUST_BE_ZERO = (
        "trackings_lost",
        "false_terminals",
        "two_terminal_ids_feed",
        "two_terminal_ids_sink",
        "terminal_missing_in_feed",
        "terminal_missing_at_sink",
        "terminal_events_without_tracking",
        "bad_signatures",
        "secrets_leaked",
        "hostile_inputs_accepted_wrongly",
    )

    @property
    def failures(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.MUST_BE_ZERO if getattr(self, k)}

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = not self.failures
        return out

    def table(self) -> str:
        rows: list[tuple[str, str]] = [("trackings", str(self.trackings))]
        for kind, n in sorted(self.faults_injected.items()):
            rows.append((f"fault injected: {kind}", str(n)))
        rows += [
            ("kills survived (SIGKILL)", str(self.kills_survived)),
            ("hostile inputs tried", str(self.hostile_inputs_tried)),
        ]
        for outcome, n in sorted(self.terminal_by_outcome.items()):
            rows.append((f"terminal: {outcome}", str(n)))
        for name in self.MUST_BE_ZERO:
            rows.append((name.replace("_", " ") + " (must be 0)", str(getattr(self, name))))
        rows += [
            ("events in feed", str(self.feed_events)),
            ("sink refusals (retried)", str(self.sink_refusals)),
            ("sink redeliveries (same id)", str(self.sink_redeliveries)),
        ]
        width = max(len(r[0]) for r in rows)
        lines = [f"{'chaos run':<{width}}  value", "-" * (width + 8)]
        lines += [f"{k:<{width}}  {v}" for k, v in rows]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"example: {e}" for e in self.examples[:10]]
        lines.append("RESULT: " + ("ok" if not self.failures else f"FAILED {self.failures}"))
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.as_json(), indent=2, sort_keys=True))


def check(
    report: ChaosReport,
    truth: dict[str, str],
    acknowledged: set[str],
    trackings: list[dict[str, Any]],
    events: list[dict[str, Any]],
    sink_terminal: dict[str, set[str]] | None,
    sink_terminal_hits: int = 0,
) -> ChaosReport:
    """Compare what the service says (trackings, feed, sink) with the scripted truth.

    ``truth`` maps "workspace/kind/remote_id" to the outcome the simulator was
    scripted to reach; ``acknowledged`` holds every tracking_id intake answered
    2xx for (each must still exist).
    """
    by_key = {f"{t['workspace']}/{t['kind']}/{t['remote_id']}": t for t in trackings}
    ids = {t["tracking_id"] for t in trackings}
    report.trackings = len(truth)
    report.trackings_lost = len(acknowledged - ids) + len(set(truth) - set(by_key))
    for key in sorted(set(truth) - set(by_key)):
        report.examples.append(f"lost {key}")
    outcomes: Counter[str] = Counter()
    for key, expected in truth.items():
        t = by_key.get(key)
        if t is None:
            continue
        outcomes[str(t["outcome"])] += 1
        if t["state"] != "terminal" or t["outcome"] != expected:
            report.false_terminals += 1
            report.examples.append(f"{key}: expected {expected}, reported {t['outcome']}")
    report.terminal_by_outcome = dict(outcomes)

    terminal = [e for e in events if not e["type"].endswith("status_changed")]
    report.feed_events = len(events)
    feed_ids: dict[str, set[str]] = defaultdict(set)
    feed_count: Counter[str] = Counter()
    for e in terminal:
        feed_ids[e["subject"]].add(e["id"])
        feed_count[e["subject"]] += 1
        if e["subject"] not in ids:
            report.terminal_events_without_tracking += 1
        outcome = e["type"].rsplit(".", 1)[-1]
        tracked = by_key.get(
            f"{e['data']['workspace']}/{e['data']['kind']}/{e['data']['remote_id']}"
        )
        if tracked is not None and tracked["outcome"] != outcome:
            report.false_terminals += 1
            report.examples.append(f"event {e['id']} says {outcome}, tracking {tracked['outcome']}")
    report.two_terminal_ids_feed = sum(
        1 for s, n in feed_count.items() if n > 1 or len(feed_ids[s]) > 1
    )
    terminal_ids = {t["tracking_id"] for t in trackings if t["state"] == "terminal"}
    report.terminal_missing_in_feed = len(terminal_ids - set(feed_ids))
    if sink_terminal is not None:
        report.two_terminal_ids_sink = sum(1 for v in sink_terminal.values() if len(v) > 1)
        report.terminal_missing_at_sink = len(terminal_ids - set(sink_terminal))
        for subject, got in sink_terminal.items():
            if got - feed_ids.get(subject, set()):
                report.two_terminal_ids_sink += 1
                report.examples.append(f"sink got an event id for {subject} not in the feed")
        report.sink_redeliveries = sink_terminal_hits - sum(len(v) for v in sink_terminal.values())
    return report


def leaked(secrets: list[str], *texts: str) -> int:
    """How many of ``secrets`` appear in any of ``texts``."""
    return sum(1 for s in secrets if s and any(s in t for t in texts))
