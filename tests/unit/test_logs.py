"""Log formats, structured fields and the guarantee that secrets never appear."""

from __future__ import annotations

import io
import logging
import secrets
from collections.abc import Iterator

import orjson
import pytest

from orchestrator.errors import ConfigError
from orchestrator.logs import (
    MASK,
    JsonFormatter,
    RedactionFilter,
    Redactor,
    configure_logging,
    log_event,
    register_secret,
    scrub,
)

FIELDS = {
    "tracking_id": "trk_01HZX",
    "workspace": "default",
    "kind": "function_job",
    "remote_id": "job-5f0c2a9e",
    "outcome": "succeeded",
}


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in root.handlers:
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def _configured(fmt: str, level: str = "DEBUG") -> io.StringIO:
    out = io.StringIO()
    configure_logging(fmt, level, stream=out)  # type: ignore[arg-type]
    return out


def _json_lines(out: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def _secret() -> str:
    return "s3cr3t-" + secrets.token_hex(12)


@pytest.mark.usefixtures("restore_root")
def test_json_line_has_the_base_keys_and_fields() -> None:
    out = _configured("json")
    log_event(logging.getLogger("orchestrator.engine"), "tracking terminal", **FIELDS, polls=7)
    [line] = _json_lines(out)
    assert line["level"] == "info"
    assert line["logger"] == "orchestrator.engine"
    assert line["msg"] == "tracking terminal"
    assert isinstance(line["ts"], str) and line["ts"].endswith("Z")
    for key, value in FIELDS.items():
        assert line[key] == value
    assert line["polls"] == 7


@pytest.mark.usefixtures("restore_root")
def test_json_accepts_fields_through_extra_and_keeps_reserved_keys() -> None:
    out = _configured("json")
    logging.getLogger("x").warning(
        "sent %d polls", 3, extra={"fields": {"workspace": "default", "msg": "clash"}}
    )
    [line] = _json_lines(out)
    assert line["msg"] == "sent 3 polls"
    assert line["msg_"] == "clash"
    assert line["workspace"] == "default"
    assert line["level"] == "warning"


@pytest.mark.usefixtures("restore_root")
def test_console_format_is_one_readable_line_with_the_fields() -> None:
    out = _configured("console")
    log_event(logging.getLogger("orchestrator.engine"), "tracking terminal", **FIELDS)
    text = out.getvalue()
    assert text.count("\n") == 1
    assert "INFO" in text and "orchestrator.engine" in text and "tracking terminal" in text
    for key, value in FIELDS.items():
        assert f"{key}={value}" in text
    assert "\x1b[" not in text  # no colour codes when the stream is not a terminal


@pytest.mark.usefixtures("restore_root")
def test_level_filters_and_bad_level_is_a_config_error() -> None:
    out = _configured("json", level="warning")
    logging.getLogger("x").info("quiet")
    log_event(logging.getLogger("x"), "quiet too")
    logging.getLogger("x").error("loud")
    assert [line["msg"] for line in _json_lines(out)] == ["loud"]
    with pytest.raises(ConfigError, match=r"logging\.level"):
        configure_logging("json", "chatty")


@pytest.mark.usefixtures("restore_root")
def test_configuring_twice_replaces_our_handler() -> None:
    first = _configured("json")
    second = _configured("json")
    logging.getLogger("x").warning("once")
    assert first.getvalue() == ""
    assert len(_json_lines(second)) == 1


@pytest.mark.parametrize("fmt", ["json", "console"])
@pytest.mark.usefixtures("restore_root")
def test_registered_secrets_never_appear(fmt: str) -> None:
    token, sink = _secret(), "whsec_" + secrets.token_urlsafe(24)
    register_secret(token)
    register_secret(sink)
    out = _configured(fmt)
    log = logging.getLogger("orchestrator.test")
    log.info("message with %s", token)
    log.info(f"inline {token} and {sink}")
    log_event(
        log, "fields", token_env="WORKSPACE_API_TOKEN", note=f"x {token}", nested=[{"a": sink}]
    )
    try:
        raise RuntimeError(f"upstream said {token} / {sink.removeprefix('whsec_')}")
    except RuntimeError:
        log.exception("failed with %s", token)
    log.info("stack", stack_info=True, extra={"fields": {"t": token}})
    text = out.getvalue()
    assert token not in text
    assert sink not in text
    assert sink.removeprefix("whsec_") not in text
    assert "RuntimeError" in text  # the traceback itself is kept
    assert MASK in text


@pytest.mark.parametrize(
    ("raw", "leak"),
    [
        ("headers {'Authorization': 'Bearer abcdefgh12345678'}", "abcdefgh12345678"),
        ('{"authorization": "Basic dXNlcjpwYXNzd29yZA=="}', "dXNlcjpwYXNzd29yZA=="),
        ("webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", "K5oZfzN95Z9"),
        ("sig v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,AAAAAAAAAAAAAAAAAAAAAAAA", "AAAA"),
        ("sink secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8I"),
        ("curl -H 'Authorization: Bearer eyJhbGciOi.payload.sig'", "eyJhbGciOi"),
        ("x-api-key=abc123def456", "abc123def456"),
        ("password=hunter2", "hunter2"),
    ],
)
def test_credential_shapes_are_masked_without_registration(raw: str, leak: str) -> None:
    cleaned = scrub(raw)
    assert leak not in cleaned
    assert MASK in cleaned


def test_plain_text_is_left_alone() -> None:
    text = "tracking trk_1 of job-5f0c2a9e (function_job) terminal: succeeded after 7 polls"
    assert scrub(text) == text


@pytest.mark.usefixtures("restore_root")
def test_sensitive_field_keys_are_masked_whole_and_other_fields_kept() -> None:
    out = _configured("json")
    log_event(
        logging.getLogger("x"),
        "sink configured",
        sink="default",
        secret="not-registered-but-named-secret",
        headers={"Authorization": "Bearer zzzzzzzzzzzz", "Accept": "application/json"},
        retries=3,
    )
    [line] = _json_lines(out)
    assert line["secret"] == MASK
    assert line["headers"] == {"Authorization": MASK, "Accept": "application/json"}
    assert line["sink"] == "default" and line["retries"] == 3


def test_a_secret_containing_another_is_masked_whole() -> None:
    r = Redactor()
    r.register("abcd")
    r.register("abcdefgh")
    r.register("")
    r.register(None)
    assert r.scrub("x abcdefgh y abcd z") == f"x {MASK} y {MASK} z"


def test_badly_formatted_arguments_do_not_raise_and_are_scrubbed() -> None:
    token = _secret()
    register_secret(token)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "two %s %s", (token,), None)
    assert RedactionFilter().filter(record)
    line = orjson.loads(JsonFormatter().format(record))
    assert token not in str(line["msg"])
    assert "two" in str(line["msg"])
