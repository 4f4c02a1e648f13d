import uuid

import orjson
import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http_event

from orchestrator.client.models import Event
from orchestrator.config import EventsConfig, SinkConfig
from orchestrator.events.cloudevents import EventFactory
from orchestrator.resource import tracking_resource
from orchestrator.store.base import Tracking

NOW = 1_800_000_000.25


def tracking(**over: object) -> Tracking:
    base: dict[str, object] = dict(
        tracking_id="trk_1",
        workspace="blue",
        kind="function_job",
        remote_id="J-1",
        state="terminal",
        outcome="succeeded",
        remote_status="Completed",
        remote={"Status": 2},
        result={"run_status": "Success"},
        polls=3,
        last_polled_at=NOW - 1,
        next_poll_at=None,
        last_error=None,
        deadline_at=NOW + 3600,
        created_at=NOW - 60,
        terminal_at=NOW,
        labels={"team": "billing"},
        correlation_id="req-1",
        callback_url=None,
        notify="terminal",
    )
    base.update(over)
    return Tracking(**base)  # type: ignore[arg-type]


def config(*sinks: str) -> EventsConfig:
    return EventsConfig(sinks=[SinkConfig(name=n, url=f"http://127.0.0.1:1/{n}") for n in sinks])


def test_terminal_event_is_a_cloudevent_with_the_tracking_as_data() -> None:
    t = tracking()
    ev = EventFactory(config("a", "b")).terminal(t, NOW)
    body = orjson.loads(ev.payload)
    assert body == {
        "specversion": "1.0",
        "id": ev.event_id,
        "source": "urn:moltaro-orchestrator:blue",
        "type": "com.moltaro.orchestrator.tracking.succeeded",
        "subject": "trk_1",
        "time": "2027-01-15T08:00:00.250Z",
        "datacontenttype": "application/json",
        "data": tracking_resource(t),
    }
    assert uuid.UUID(ev.event_id).version == 4
    assert ev.type == body["type"] and ev.time == NOW and ev.tracking_id == "trk_1"
    assert ev.destinations == ["sink:a", "sink:b"] and ev.callback_url is None

    parsed = from_http_event(
        HTTPMessage(headers={"content-type": "application/cloudevents+json"}, body=ev.payload)
    )
    assert parsed.get_id() == ev.event_id
    assert parsed.get_subject() == "trk_1"
    assert parsed.get_data() == tracking_resource(t)


@pytest.mark.parametrize(
    "outcome", ["succeeded", "failed", "cancelled", "deadline_exceeded", "not_found", "abandoned"]
)
def test_type_names_the_outcome(outcome: str) -> None:
    ev = EventFactory(config()).terminal(tracking(outcome=outcome), NOW)
    assert ev.type == f"com.moltaro.orchestrator.tracking.{outcome}"


def test_callback_is_a_destination_when_the_tracking_has_one() -> None:
    url = "https://hooks.example/cb?x=1"
    ev = EventFactory(config("a")).terminal(tracking(callback_url=url), NOW)
    assert ev.destinations == ["sink:a", "callback"] and ev.callback_url == url


def test_status_changed_and_fresh_ids() -> None:
    f = EventFactory(config())
    t = tracking(state="active", outcome=None, terminal_at=None, next_poll_at=NOW + 1)
    a, b = f.status_changed(t, NOW), f.status_changed(t, NOW)
    assert a.type == "com.moltaro.orchestrator.tracking.status_changed"
    assert a.event_id != b.event_id
    assert orjson.loads(a.payload)["data"]["state"] == "active"


def test_terminal_without_outcome_is_refused() -> None:
    with pytest.raises(ValueError):
        EventFactory(config()).terminal(tracking(outcome=None), NOW)


def test_a_sink_event_is_about_the_sink_and_goes_to_every_other_sink_only() -> None:
    cfg = EventsConfig(
        sinks=[SinkConfig(name=n, url=f"http://127.0.0.1:9/{n}") for n in ("a", "b", "c")]
    )
    state = {"name": "a", "disabled": True, "disabled_reason": "HTTP 410", "pending": 3}
    event = EventFactory(cfg).sink_event("com.moltaro.orchestrator.sink.disabled", "a", state, NOW)
    assert event.tracking_id is None and event.sink == "sink:a"
    assert event.destinations == ["sink:b", "sink:c"] and event.callback_url is None
    body = orjson.loads(event.payload)
    assert body["id"] == event.event_id and str(uuid.UUID(body["id"])) == body["id"]
    assert body["source"] == "urn:moltaro-orchestrator:sinks" and body["subject"] == "a"
    assert body["type"] == event.type and body["data"] == state
    parsed = from_http_event(
        HTTPMessage(headers={"content-type": "application/cloudevents+json"}, body=event.payload)
    )
    assert parsed.get_type() == "com.moltaro.orchestrator.sink.disabled"
    # The client reads it from the feed without taking it for a tracking.
    read = Event.from_json({**body, "seq": 9})
    assert read.data is None and read.outcome is None and read.sink == state
    assert read.subject == "a" and read.seq == 9
