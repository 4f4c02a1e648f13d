"""Configuration: one TOML file, every key overridable from the environment.

Precedence, highest first: ``ORCH_SECTION__KEY`` environment variables,
``WORKSPACE_API_BASE_URL`` (base URL of the workspace named ``default``), the
TOML file, the embedded defaults below. Secrets are never read from the file:
the file names the environment variable that holds each one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from orchestrator.errors import ConfigError
from orchestrator.vocabulary import KINDS, Kind

DEFAULT_CONFIG_PATH = Path("config/orchestrator.toml")
# polling.stall_lag_s when unset: a sixth of store.lease_timeout_s, at most this.
STALL_LAG_MAX_S = 5.0


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerConfig(_Section):
    listen: str = "127.0.0.1:8080"
    api_tokens_env: str = "ORCH_API_TOKENS"
    allow_unauthenticated: bool = False
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    shutdown_hard_s: float = Field(default=5.0, ge=0)
    # Names this process among replicas sharing a PostgreSQL store (metrics, logs,
    # /readyz, lease owner); None: host name and pid.
    replica_id: str | None = Field(default=None, min_length=1, max_length=100)

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, port = split_listen(v)
        if not host or not 0 <= port <= 65535:
            raise ValueError("must be HOST:PORT")
        return v


class StoreConfig(_Section):
    path: str = "data/orchestrator.db"
    commit_interval_s: float = Field(default=0.005, ge=0, le=1)
    synchronous: Literal["NORMAL", "FULL"] = "FULL"
    max_batch: int = Field(default=2000, ge=1)
    # PostgreSQL for several replicas (store.path is then ignored); the password is
    # read from the environment variable password_env names, never from the URL.
    url: str | None = None
    password_env: str = "ORCH_STORE_PASSWORD"
    pool_size: int = Field(default=10, ge=2, le=1000)
    lease_timeout_s: float = Field(default=30, gt=0)
    claim_batch: int = Field(default=500, ge=1, le=100_000)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        if not re.match(r"^postgres(ql)?://[^/?#]*", v):
            raise ValueError("must be a postgresql:// URL")
        userinfo = v.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        if ":" in userinfo:
            raise ValueError("must not contain a password: set it in store.password_env")
        return v


class AdaptiveConfig(_Section):
    """Adaptive polling: reads placed from the learned durations of each work class."""

    enabled: bool = True
    # Mean delay, in seconds, between the remote end and the read that sees it.
    detection_target_s: float = Field(default=1.0, gt=0)
    # Finished trackings of a class before its durations are trusted.
    min_samples: int = Field(default=10, ge=1)
    # A sample weighs half as much after this many newer ones of its class.
    half_life_samples: float = Field(default=50, ge=1)
    # Classes kept (every workspace and kind together); the least recently
    # finished goes first.
    max_classes: int = Field(default=1000, ge=1, le=100_000)
    flush_interval_s: float = Field(default=30, gt=0)


class PollingConfig(_Section):
    initial_delay_s: float = Field(default=1.0, gt=0)
    max_delay_s: float = Field(default=30.0, gt=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.2, ge=0, lt=1)
    default_deadline_s: float = Field(default=3600, gt=0)
    max_deadline_s: float = Field(default=604800, gt=0)
    not_found_confirmations: int = Field(default=3, ge=1)
    not_found_min_s: float = Field(default=10, ge=0)
    openapi_refresh_s: float = Field(default=300, gt=0)
    # Added to a function job's derived deadline (its timeout x attempts plus retry delays).
    deadline_margin_s: float = Field(default=60, ge=0)
    # A finished function job's result lists its runs (one admin read per job).
    run_history: bool = True
    # Work found by filter (trigger_work, action_work) without a caller's `since`
    # matches jobs created from the intake time less this much (commit lag, clocks).
    filter_skew_s: float = Field(default=5.0, ge=0, le=3600)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)
    # Event-loop lag above this stops lease renewals and gives the leases up
    # (several replicas): a stalled loop must not keep work it cannot poll.
    # Left unset, it follows store.lease_timeout_s (Settings._stall_lag).
    stall_lag_s: float = Field(default=STALL_LAG_MAX_S, gt=0)

    @model_validator(mode="after")
    def _order(self) -> PollingConfig:
        if self.max_delay_s < self.initial_delay_s:
            raise ValueError("max_delay_s must be >= initial_delay_s")
        if self.default_deadline_s > self.max_deadline_s:
            raise ValueError("default_deadline_s must be <= max_deadline_s")
        return self


_ADMIN = "/api/workspace/admin"
# Administrative list routes: no {id}; every other path names one resource.
_LIST_PATHS = frozenset(
    {
        "function_schedules",
        "function_catalog",
        "binding_summaries",
        "api_functions",
        "function_jobs",
        "function_runs",
    }
)


class WorkspacePaths(_Section):
    function_job: str = "/api/workspace/functions/jobs/{id}"
    function_job_cancel: str = "/api/workspace/functions/jobs/{id}/cancel"
    net_operation_build: str = "/api/workspace/admin/net-operation-project/builds/{id}"
    workspace_ui_build: str = "/api/workspace/admin/ui-project/builds/{id}"
    schedule: str = _ADMIN + "/function-schedules/{id}"
    function_schedules: str = _ADMIN + "/function-schedules"
    function_catalog: str = _ADMIN + "/function-catalog"
    binding_summaries: str = _ADMIN + "/function-catalog/binding-summaries"
    api_functions: str = _ADMIN + "/api-functions"
    function_jobs: str = _ADMIN + "/function-operations/jobs"
    function_runs: str = _ADMIN + "/function-operations/runs"
    operations_job: str = _ADMIN + "/function-operations/jobs/{id}"
    stop_retries: str = _ADMIN + "/function-operations/jobs/{id}/stop-retries"

    def route(self, kind: Kind) -> str:
        """The kind's own route ({id}); a ValueError for a kind found by filter."""
        key = KINDS[kind].route
        if key is None:
            raise ValueError(f"kind {kind} has no route of its own")
        return str(getattr(self, key))

    @field_validator("*")
    @classmethod
    def _has_id(cls, v: str, info: ValidationInfo) -> str:
        if info.field_name in _LIST_PATHS:
            if not v.startswith("/") or "{" in v:
                raise ValueError("must start with / and contain no {placeholder}")
        elif not v.startswith("/") or v.count("{id}") != 1:
            raise ValueError("must start with / and contain {id} once")
        return v


class WorkspaceConfig(_Section):
    name: str = "default"
    base_url: str = "http://127.0.0.1:5080"
    token_env: str = "WORKSPACE_API_TOKEN"
    openapi_path: str = "/swagger/v1/swagger.json"
    max_in_flight: int = Field(default=64, ge=1, le=10_000)
    max_requests_per_second: float = Field(default=500, gt=0)
    request_timeout_s: float = Field(default=10, gt=0)
    # A larger answer is invalid_response, read no further than this.
    max_response_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    # PEM file of extra trusted CA certificates (a private platform CA), beside
    # the system's trust store.
    ca_bundle: str = ""
    # Idle pooled connections are closed after this: below the workspace's
    # keep-alive, so that a read seldom meets a connection the server closed.
    pool_idle_timeout_s: float = Field(default=15, gt=0)
    # Rows asked for per page of a Function operations list route (its Limit).
    list_page_size: int = Field(default=200, ge=1, le=1000)
    # The runtime Job timeout of this workspace: what a job's null TimeoutSeconds means.
    job_timeout_default_s: float = Field(default=300, gt=0)
    paths: WorkspacePaths = Field(default_factory=WorkspacePaths)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError("must be 1-64 characters of [A-Za-z0-9_.-]")
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/?#@]+", v):
            raise ValueError("must be an http(s) URL with a host and no userinfo")
        return v.rstrip("/")


# How deliveries are signed: Standard Webhooks with a whsec_ secret, or "none".
Signing = Literal["standard-webhooks", "none"]


class SinkConfig(_Section):
    name: str
    url: str
    secret_env: str | None = None
    max_age_s: float = Field(default=86400, gt=0)
    max_in_flight: int = Field(default=16, ge=1, le=1000)
    # CloudEvents HTTP content mode: the whole event as the body, or binary
    # (ce-* headers, the data as the body).
    mode: Literal["structured", "binary"] = "structured"
    # Unsigned only when said here: a missing or wrong secret stops start-up instead.
    signing: Signing = "standard-webhooks"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/?#]+", v):
            raise ValueError("must be an http(s) URL")
        return v


class EventsConfig(_Section):
    callback_allowlist: list[str] = Field(default_factory=list)
    callback_secret_env: str = "ORCH_CALLBACK_SECRET"
    callback_signing: Signing = "standard-webhooks"
    callback_max_age_s: float = Field(default=86400, gt=0)
    retry_schedule_s: list[float] = Field(
        default_factory=lambda: [5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0]
    )
    delivery_timeout_s: float = Field(default=10, gt=0)
    retention_s: float = Field(default=7 * 86400, gt=0)
    prune_interval_s: float = Field(default=60, gt=0)
    # A sink with no successful delivery for this long is disabled (Standard
    # Webhooks' five days); 0 never disables one for want of success.
    disable_after_s: float = Field(default=5 * 86400, ge=0)
    sinks: list[SinkConfig] = Field(default_factory=list)

    @field_validator("retry_schedule_s")
    @classmethod
    def _schedule(cls, v: list[float]) -> list[float]:
        if not v or any(d < 0 for d in v):
            raise ValueError("must be a non-empty list of non-negative seconds")
        return v


class MetricsConfig(_Section):
    # Work classes (function keys, build kinds) that get label values of their own;
    # the rest are counted as "other".
    max_classes: int = Field(default=50, ge=1, le=10_000)


class LoggingConfig(_Section):
    format: Literal["json", "console"] = "json"
    level: str = "INFO"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ORCH_",
        env_nested_delimiter="__",
        extra="forbid",
        case_sensitive=False,
    )

    server: ServerConfig = Field(default_factory=ServerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    polling: PollingConfig = Field(default_factory=PollingConfig)
    workspaces: list[WorkspaceConfig] = Field(default_factory=lambda: [WorkspaceConfig()])
    events: EventsConfig = Field(default_factory=EventsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)

    @model_validator(mode="after")
    def _unique(self) -> Settings:
        names = [w.name for w in self.workspaces]
        if not names:
            raise ValueError("workspaces: at least one workspace is required")
        if len(set(names)) != len(names):
            raise ValueError("workspaces: names must be unique")
        sinks = [s.name for s in self.events.sinks]
        if len(set(sinks)) != len(sinks):
            raise ValueError("events.sinks: names must be unique")
        return self

    @model_validator(mode="after")
    def _stall_lag(self) -> Settings:
        lease = self.store.lease_timeout_s
        if "stall_lag_s" not in self.polling.model_fields_set:
            # Unset, it follows the lease, so that setting only lease_timeout_s is
            # enough; a sixth keeps it well under the renewal period (a third).
            derived = min(STALL_LAG_MAX_S, lease / 6)
            self.polling = self.polling.model_copy(update={"stall_lag_s": derived})
        elif self.store.url and self.polling.stall_lag_s >= lease / 3:
            # Renewals run every third of the timeout: a lag that long loses leases
            # before the stall is even noticed.
            raise ValueError(
                f"polling.stall_lag_s: must be under store.lease_timeout_s / 3 ({lease / 3:.3g} s)"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = _TOML_PATH.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    def workspace(self, name: str) -> WorkspaceConfig | None:
        return next((w for w in self.workspaces if w.name == name), None)


# pydantic-settings builds sources from class-level hooks, so the chosen file is
# handed over here for the duration of one load() call.
_TOML_PATH: dict[str, Path | None] = {}


def split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError("must be HOST:PORT")
    return host.strip("[]"), int(port)


def resolve_config_path(explicit: str | None) -> Path | None:
    """The file named by --config, else ORCH_CONFIG, else config/orchestrator.toml if present."""
    for source, given in (("config", explicit), ("ORCH_CONFIG", os.environ.get("ORCH_CONFIG"))):
        if given:
            if not Path(given).is_file():
                raise ConfigError(f"{source}: file not found: {given}")
            return Path(given)
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.is_file() else None


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load and validate; any problem becomes one ConfigError naming the key."""
    _TOML_PATH["path"] = Path(path) if path is not None else None
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err["loc"] and err["msg"].startswith("Value error, "):
            # A check across sections: its message already begins with the key.
            raise ConfigError(err["msg"].removeprefix("Value error, ")) from None
        key = ".".join(str(p) for p in err["loc"]) or "config"
        raise ConfigError(f"{key}: {err['msg']}") from None
    except (ValueError, OSError) as exc:
        raise ConfigError(f"config: {exc}") from None
    finally:
        _TOML_PATH.pop("path", None)
    base = os.environ.get("WORKSPACE_API_BASE_URL")
    if base:
        default = settings.workspace("default")
        if default is not None:
            try:
                default.base_url = WorkspaceConfig._base_url(base)
            except ValueError as exc:
                raise ConfigError(f"WORKSPACE_API_BASE_URL: {exc}") from None
    return settings


def api_tokens(settings: Settings) -> frozenset[str]:
    raw = os.environ.get(settings.server.api_tokens_env, "")
    return frozenset(t.strip() for t in raw.split(",") if t.strip())
