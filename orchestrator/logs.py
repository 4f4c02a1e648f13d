"""Logging: JSON lines or a readable console format, with secrets scrubbed.

Structured fields travel in ``extra={"fields": {...}}``; ``log_event`` is the
short way to write one::

    log_event(log, "tracking terminal", tracking_id=t.id, workspace="default",
              kind=t.kind, remote_id=t.remote_id, outcome="succeeded")

A JSON line carries ``ts``, ``level``, ``logger``, ``msg``, then the fields,
then ``exc`` (a traceback) when there is one.

Redaction happens in a filter on our handler, before any formatting, and
rewrites the record in place (message with its arguments merged, fields,
traceback, stack): whatever formats the record afterwards sees only scrubbed
text. It removes every value passed to ``register_secret`` (the service
registers the workspace tokens, sink secrets and API tokens at start-up) and,
whether registered or not, anything shaped like a credential: Authorization
and webhook-signature header values, bearer tokens, ``whsec_`` secrets and
Standard Webhooks ``v1,<base64>`` signatures. Field values whose key names a
secret (``token``, ``secret``, ``authorization``...) are masked whole.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import IO, Literal, TypeAlias

import orjson

from orchestrator.clock import iso
from orchestrator.errors import ConfigError

MASK = "***"

ExcInfo: TypeAlias = (
    bool
    | BaseException
    | tuple[type[BaseException], BaseException, TracebackType | None]
    | tuple[None, None, None]
    | None
)

# Credential shapes masked even when nobody registered the value. Each keeps
# its key/scheme (useful when reading a log) and masks only the value.
_HEADER_VALUE = re.compile(
    r"(?i)\b(?P<key>(?:proxy-)?authorization|webhook-signature|x-api-key|api[-_]?key"
    r"|access[-_]?token|refresh[-_]?token|token|secret|password|passwd)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?P<scheme>bearer|basic|token|digest)\s+)?"
    r"(?P<value>[^\s\"',;}\]]+)"
)
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_WHSEC = re.compile(r"whsec_[A-Za-z0-9+/=_-]+")
_SIGNATURE = re.compile(r"\bv1a?,[A-Za-z0-9+/_-]{16,}={0,2}")
_SENSITIVE_KEY = re.compile(
    r"(?i)(authorization|secret|token|password|passwd|signature|api[-_]?key|cookie|whsec)"
)


def _mask_header(m: re.Match[str]) -> str:
    if m.group("value").startswith(MASK):
        return m.group(0)
    scheme = m.group("scheme")
    return f"{m.group('key')}{m.group('sep')}{scheme + ' ' if scheme else ''}{MASK}"


class Redactor:
    """Scrubs registered secret values and credential-shaped text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._literal: re.Pattern[str] | None = None

    def register(self, value: str | None) -> None:
        """Never let ``value`` appear in a log line from now on (empty values are ignored)."""
        if not value:
            return
        values = {value}
        # A Standard Webhooks secret is also used (and could leak) without its prefix.
        if value.startswith("whsec_") and len(value) > len("whsec_"):
            values.add(value[len("whsec_") :])
        with self._lock:
            if values <= self._secrets:
                return
            self._secrets |= values
            # Longest first, so that a secret containing another is masked whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._literal = re.compile("|".join(re.escape(s) for s in ordered))

    def scrub(self, text: str) -> str:
        """``text`` as it would appear in a log line."""
        literal = self._literal
        if literal is not None:
            text = literal.sub(MASK, text)
        text = _WHSEC.sub("whsec_" + MASK, text)
        text = _SIGNATURE.sub(lambda m: m.group(0).split(",", 1)[0] + "," + MASK, text)
        text = _HEADER_VALUE.sub(_mask_header, text)
        return _BEARER.sub(lambda m: f"{m.group('scheme')} {MASK}", text)

    def scrub_value(self, value: object, key: str | None = None) -> object:
        """A JSON-ready copy of ``value`` with every string scrubbed."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if key is not None and value != "" and _SENSITIVE_KEY.search(key):
            return MASK
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, Mapping):
            return {str(k): self.scrub_value(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.scrub_value(v) for v in value]
        return self.scrub(str(value))


# The process's redactor: logging is process-wide, and secrets are registered
# before (or after) logging is configured, so it cannot belong to a handler.
_REDACTOR = Redactor()
register_secret = _REDACTOR.register  # the service calls it at start-up for every secret
scrub = _REDACTOR.scrub


class RedactionFilter(logging.Filter):
    """Rewrites a record so that nothing formatted from it carries a secret."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor if redactor is not None else _REDACTOR
        self._exc_formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        r = self._redactor
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            # Arguments that do not fit the format: keep both, scrubbed, rather than raise.
            message = f"{record.msg} {record.args!r}"
        record.msg = r.scrub(message)
        record.args = None
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            record.fields = r.scrub_value(fields)
        if record.exc_info and not record.exc_text:
            record.exc_text = self._exc_formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.scrub(record.exc_text)
            # Handlers that render exc_info themselves would bypass the scrub.
            record.exc_info = None
        if record.stack_info:
            record.stack_info = r.scrub(record.stack_info)
        return True


_RESERVED = frozenset({"ts", "level", "logger", "msg", "exc", "stack"})


def _fields(record: logging.LogRecord) -> Mapping[str, object]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


class _Formatter(logging.Formatter):
    def _trailer(self, record: logging.LogRecord) -> dict[str, str]:
        """The record's traceback (``exc``) and stack (``stack``), those it has."""
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        return {k: v for k, v in (("exc", record.exc_text), ("stack", record.stack_info)) if v}


class JsonFormatter(_Formatter):
    """One JSON object per line: ts, level, logger, msg, the fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _fields(record).items():
            out[f"{key}_" if key in _RESERVED else key] = value
        out.update(self._trailer(record))
        return orjson.dumps(out, default=str).decode()


_COLOURS = {
    "DEBUG": "\x1b[2m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[31m",
    "CRITICAL": "\x1b[1;31m",
}


class ConsoleFormatter(_Formatter):
    """``19:30:01.250 INFO  orchestrator.engine  tracking terminal  outcome=succeeded``."""

    def __init__(self, colour: bool = False) -> None:
        super().__init__()
        self._colour = colour

    def format(self, record: logging.LogRecord) -> str:
        stamp = iso(record.created) or ""
        level = f"{record.levelname:<7}"
        if self._colour:
            level = f"{_COLOURS.get(record.levelname, '')}{level}\x1b[0m"
        parts = [f"{stamp[11:23]} {level} {record.name:<24} {record.getMessage()}"]
        pairs = " ".join(f"{k}={_console_value(v)}" for k, v in _fields(record).items())
        if pairs:
            parts.append(pairs)
        return "\n".join(["  ".join(parts), *self._trailer(record).values()])


def _console_value(value: object) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return orjson.dumps(value, default=str).decode()


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler ``configure_logging`` installed, so a second call replaces it."""


def configure_logging(
    format: Literal["json", "console"],
    level: str,
    stream: IO[str] | None = None,
) -> None:
    """Send every log record of the process to ``stream`` (stderr) in ``format``.

    Calling it again replaces the previous configuration; handlers installed
    by anyone else (pytest's, for instance) are left alone.
    """
    numeric = logging.getLevelName(level.strip().upper())
    if not isinstance(numeric, int):
        raise ConfigError(f"logging.level: unknown level {level!r}")
    target = stream if stream is not None else sys.stderr
    handler = _OurHandler(target)
    handler.addFilter(RedactionFilter())
    if format == "json":
        handler.setFormatter(JsonFormatter())
    elif format == "console":
        handler.setFormatter(ConsoleFormatter(colour=_isatty(target)))
    else:
        raise ConfigError(f"logging.format: must be json or console, not {format!r}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def log_event(
    logger: logging.Logger,
    msg: str,
    /,
    *,
    level: int = logging.INFO,
    exc_info: ExcInfo = None,
    **fields: object,
) -> None:
    """Log ``msg`` with structured ``fields`` (tracking_id, workspace, kind, outcome...)."""
    if logger.isEnabledFor(level):
        # stacklevel=2: the record names our caller's function and line, not this one.
        logger.log(level, msg, exc_info=exc_info, extra={"fields": fields}, stacklevel=2)
