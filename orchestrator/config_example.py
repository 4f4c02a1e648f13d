"""config/orchestrator.example.toml, written from the settings model itself.

Every key comes from ``Settings`` at its default, so the example cannot drift
from the code: ``python -m orchestrator.config_example > config/orchestrator.example.toml``
writes it, and a test compares the file with ``render()``. Only the comments
are kept here, by key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from orchestrator.config import Settings, SinkConfig

HEADER = """\
# A complete configuration with every key at its default (see docs/configuration.md),
# written from the settings model: python -m orchestrator.config_example.
# Copy it to config/orchestrator.toml, or pass --config, or set ORCH_CONFIG.
# Any key can be overridden from the environment as ORCH_SECTION__KEY
# (e.g. ORCH_POLLING__MAX_DELAY_S=10); WORKSPACE_API_BASE_URL overrides the
# base URL of the workspace named "default". Secrets never go in this file:
# it names the environment variables that hold them.
"""

NOTES = {
    "server.api_tokens_env": "comma-separated bearer tokens",
    "server.allow_unauthenticated": "required to listen off-loopback without tokens",
    "server.shutdown_grace_s": "in-flight reads and deliveries may finish",
    "server.shutdown_hard_s": "then whatever is left is cancelled",
    "store.path": "SQLite file, created on first start",
    "store.commit_interval_s": "group commit: gather writes this long",
    "store.synchronous": "FULL survives power loss; NORMAL only crashes",
    "store.url": "several replicas share it; store.path is then ignored",
    "store.password_env": "holds the PostgreSQL password",
    "store.pool_size": "connections per replica",
    "store.lease_timeout_s": "a replica's work goes to others this long after its last renewal",
    "store.claim_batch": "most trackings claimed in one statement",
    "server.replica_id": "default: host name and pid",
    "polling.stall_lag_s": "loop lag that gives leases up; unset: lease_timeout_s / 6, at most 5",
    "polling.run_history": "a finished job with retries lists its runs",
    "polling.deadline_margin_s": "added to a function job's deadline derived from the job",
    "workspaces.job_timeout_default_s": "the runtime Job timeout a null TimeoutSeconds means",
    "polling.filter_skew_s": "filter kinds: default since = intake time less this",
    "polling.adaptive.enabled": "reads placed from learned durations",
    "polling.adaptive.detection_target_s": "mean delay from remote end to its read",
    "polling.adaptive.min_samples": "finished trackings before a class is trusted",
    "polling.adaptive.half_life_samples": "older samples fade after this many newer",
    "polling.adaptive.max_classes": "work classes kept, all workspaces together",
    "metrics.max_classes": 'class label values; the rest are "other"',
    "workspaces.max_in_flight": "requests of every kind at once",
    "workspaces.max_requests_per_second": "held over every one-second window",
    "workspaces.list_page_size": "Limit of each Function operations list page",
    "workspaces.max_response_bytes": "a larger answer is invalid_response, never held whole",
    "workspaces.ca_bundle": "PEM file of extra trusted CAs (a private platform CA)",
    "workspaces.pool_idle_timeout_s": "below the workspace's keep-alive timeout",
    "events.callback_allowlist": "URL prefixes a callback_url must start with",
    "events.retention_s": "delivered events and terminal trackings are pruned after",
    "events.callback_secret_env": "its whsec_ secret; required once callbacks are allowed",
    "events.callback_signing": '"none": callbacks unsigned, on purpose',
    "events.sinks.secret_env": "a whsec_... secret signs deliveries",
    "events.sinks.signing": '"none": unsigned, on purpose (else secret_env is required)',
    "logging.format": "or console",
}
# Keys that default to None, shown commented out with an example value.
_EXAMPLES = {
    "store.url": "postgresql://orch@127.0.0.1:5432/orch",
    "server.replica_id": "orchestrator-1",
}
# Keys whose default follows another key's value: commented out, so that a copy of
# this file still lets them follow it.
_DERIVED = {"polling.stall_lag_s"}
_TABLE_LISTS = {"sinks"}  # lists of tables, written as [[...]] of their own
_SINK_EXAMPLE = SinkConfig(
    name="default", url="http://127.0.0.1:9000/hooks", secret_env="ORCH_SINK_SECRET"
)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # TOML's 10 is read as 10.0 where the key is a float
    return repr(value)


def _table(
    name: str, model: BaseModel, out: list[str], array: bool = False, mark: str = ""
) -> None:
    """``model``'s plain keys under ``[name]`` (``[[name]]`` in an array), then its sub-tables."""
    out += ["", mark + (f"[[{name}]]" if array else f"[{name}]")]
    nested: list[tuple[str, BaseModel]] = []
    for key in type(model).model_fields:
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            nested.append((key, value))
            continue
        example = _EXAMPLES.get(f"{name}.{key}")
        if (value is None and example is None) or key in _TABLE_LISTS:
            continue
        shown = example if value is None else value
        commented = value is None or f"{name}.{key}" in _DERIVED
        line = f"{mark or '# ' if commented else mark}{key} = {_value(shown)}"
        note = NOTES.get(f"{name}.{key}")
        out.append(f"{line:<39} # {note}" if note else line)  # notes from column 41
    for key, sub in nested:
        _table(f"{name}.{key}", sub, out, mark=mark)


def render() -> str:
    s = Settings()
    out = [HEADER.rstrip("\n")]
    for section in ("server", "store", "polling", "logging", "metrics"):
        _table(section, getattr(s, section), out)
    for workspace in s.workspaces:
        _table("workspaces", workspace, out, array=True)
    _table("events", s.events, out)
    out += ["", "# No sink by default; one looks like this:"]
    _table("events.sinks", _SINK_EXAMPLE, out, array=True, mark="# ")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
