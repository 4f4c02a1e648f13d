"""Intake extraction: the id and polling URL in an enqueue response, and the URL guard."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.interpret import extract_polling_url, extract_remote_id, polling_url_matches

BASE = "http://127.0.0.1:5080"
ROUTE = "/api/workspace/functions/jobs/{id}"
PATH = "/api/workspace/functions/jobs/job-1"


# --- remote id ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"JobId": "job-1"}, "job-1"),
        ({"jobId": "job-1"}, "job-1"),
        ({"JOBID": "job-1"}, "job-1"),
        ({"Id": "bld-1"}, "bld-1"),
        ({"id": "bld-1"}, "bld-1"),
        ({"Succeeded": True, "Data": {"JobId": "job-1", "Run": None}}, "job-1"),
        ({"succeeded": True, "data": {"jobId": "job-1"}}, "job-1"),
        ({"Data": {"Id": "bld-1", "Status": 0}}, "bld-1"),
        ({"JobId": 12345}, "12345"),
        # JobId is the more specific signal, wherever it is.
        ({"Id": "envelope-1", "Data": {"JobId": "job-1"}}, "job-1"),
        ({"JobId": "job-1", "Id": "other"}, "job-1"),
        ({"JobId": "top", "Data": {"JobId": "inner"}}, "top"),
        # Returned as received; intake validates the form and names the field.
        ({"JobId": "../../admin"}, "../../admin"),
        ({"JobId": None, "Id": "bld-1"}, "bld-1"),
        ({"JobId": "", "Data": {"JobId": "job-1"}}, "job-1"),
        ({"Run": {"JobId": "nested-too-deep"}}, None),
        ({"JobId": True}, None),
        ({"JobId": 1.5}, None),
        ({"JobId": 10**30}, None),
        ({"JobId": ["job-1"]}, None),
        ({"JobId": {"Value": "job-1"}}, None),
        ({"Data": "job-1"}, None),
        ({}, None),
        (None, None),
        ("job-1", None),
        ([{"JobId": "job-1"}], None),
    ],
)
def test_extract_remote_id(body: Any, expected: str | None) -> None:
    assert extract_remote_id(body) == expected


# --- polling url ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"StatusUrl": PATH}, PATH),
        ({"statusUrl": PATH}, PATH),
        ({"PollingUrl": PATH}, PATH),
        ({"url": PATH}, PATH),
        ({"Location": PATH}, PATH),
        ({"Succeeded": True, "Data": {"StatusUrl": PATH}}, PATH),
        ({"data": {"location": PATH}}, PATH),
        ({"StatusUrl": PATH, "Location": "/other"}, PATH),
        ({"Url": "/other", "Data": {"StatusUrl": PATH}}, PATH),
        ({"StatusUrl": "", "Location": PATH}, PATH),
        ({"StatusUrl": "  ", "Location": PATH}, PATH),
        ({"StatusUrl": 5}, None),
        ({"StatusUrl": None}, None),
        ({"JobId": "job-1"}, None),
        ([], None),
        (None, None),
    ],
)
def test_extract_polling_url(body: Any, expected: str | None) -> None:
    assert extract_polling_url(body) == expected


# --- polling url guard --------------------------------------------------------------------------

ACCEPTED = [
    PATH,
    f"{BASE}{PATH}",
    f"HTTP://127.0.0.1:5080{PATH}",
]

REJECTED = [
    # other hosts, ports, schemes
    f"http://evil.test:5080{PATH}",
    f"http://127.0.0.2:5080{PATH}",
    f"http://127.1:5080{PATH}",
    f"http://0x7f.0.0.1:5080{PATH}",
    f"http://2130706433:5080{PATH}",
    f"http://localhost:5080{PATH}",
    f"http://127.0.0.1.:5080{PATH}",
    f"http://[::1]:5080{PATH}",
    f"http://127.0.0.1{PATH}",
    f"http://127.0.0.1:80{PATH}",
    f"http://127.0.0.1:5081{PATH}",
    f"http://127.0.0.1:05080x{PATH}",
    f"http://127.0.0.1:99999{PATH}",
    f"https://127.0.0.1:5080{PATH}",
    f"ftp://127.0.0.1:5080{PATH}",
    f"javascript://127.0.0.1:5080{PATH}",
    f"http:127.0.0.1:5080{PATH}",
    f"http:/{PATH}",
    f"http://{PATH}",
    # userinfo tricks
    f"http://good@evil.test{PATH}",
    f"http://127.0.0.1:5080@evil.test{PATH}",
    f"http://evil.test@127.0.0.1:5080{PATH}",
    f"http://user:pass@127.0.0.1:5080{PATH}",
    f"http://127.0.0.1:5080%40evil.test{PATH}",
    # protocol-relative and backslashes
    f"//evil.test{PATH}",
    f"//127.0.0.1:5080{PATH}",
    f"/\\evil.test{PATH}",
    f"\\\\evil.test{PATH}",
    f"http:\\\\127.0.0.1:5080{PATH}",
    PATH.replace("/", "\\"),
    # traversal, encoded or not
    "/api/workspace/functions/jobs/../jobs/job-1",
    "/api/workspace/functions/jobs/./job-1",
    "/api/workspace/admin/../functions/jobs/job-1",
    "/api/workspace/functions/jobs/%2e%2e/jobs/job-1",
    "/api/workspace/functions/jobs/job%2D1",
    "/api/workspace/functions/jobs%2Fjob-1",
    "/api/workspace/functions/jobs/job-1%2F..%2F..%2Fadmin",
    "/api/workspace/functions/jobs/job-1%00",
    # query strings and fragments
    f"{PATH}?",
    f"{PATH}?x=1",
    f"{PATH}#",
    f"{PATH}#/other",
    f"{BASE}{PATH}?next=http://evil.test/",
    "/api/workspace/functions/jobs?id=job-1",
    # another route, another id, another shape
    "/api/workspace/functions/jobs/job-2",
    "/api/workspace/functions/jobs/job-1/cancel",
    "/api/workspace/functions/jobs/job-1/",
    "/api/workspace/functions/jobs/JOB-1",
    "/api/workspace/admin/net-operation-project/builds/job-1",
    "/API/workspace/functions/jobs/job-1",
    "api/workspace/functions/jobs/job-1",
    "jobs/job-1",
    "",
    " ",
    f" {PATH}",
    f"{PATH} ",
    f"{PATH}\n",
    f"{PATH};x=1",
    "/api/workspace/functions/jobs/job\u20111",
    f"http://127.0.0.1:5080{PATH}".replace("127", "\uff11\uff12\uff17"),
    "/" * 3000,
]


@pytest.mark.parametrize("url", ACCEPTED)
def test_polling_url_accepted(url: str) -> None:
    assert polling_url_matches(url, BASE, ROUTE, "job-1")


@pytest.mark.parametrize("url", REJECTED)
def test_polling_url_rejected(url: str) -> None:
    assert not polling_url_matches(url, BASE, ROUTE, "job-1")


@pytest.mark.parametrize(
    ("url", "base", "accepted"),
    [
        # The base URL's path is part of the route.
        (f"/tenant-a{PATH}", "http://127.0.0.1:5080/tenant-a", True),
        (f"/tenant-a{PATH}", "http://127.0.0.1:5080/tenant-a/", True),
        (f"http://127.0.0.1:5080/tenant-a{PATH}", "http://127.0.0.1:5080/tenant-a", True),
        (PATH, "http://127.0.0.1:5080/tenant-a", False),
        (f"/tenant-b{PATH}", "http://127.0.0.1:5080/tenant-a", False),
        # Default ports are the same port.
        (f"https://moltaro.internal{PATH}", "https://moltaro.internal:443", True),
        (f"https://moltaro.internal:443{PATH}", "https://Moltaro.Internal", True),
        (f"http://moltaro.internal{PATH}", "https://moltaro.internal", False),
        (f"https://moltaro.internal.evil{PATH}", "https://moltaro.internal", False),
        (f"https://moltaro.internal:0{PATH}", "https://moltaro.internal", False),
        # IP literals compare as written.
        (f"http://[::1]:5080{PATH}", "http://[::1]:5080", True),
        (f"http://[0:0::1]:5080{PATH}", "http://[::1]:5080", False),
        # A base URL we would not poll is never matched.
        (PATH, "http://user@127.0.0.1:5080", False),
        (PATH, "ftp://127.0.0.1", False),
        (PATH, "http://127.0.0.1:5080/?x=1", False),
        (PATH, "not a url", False),
        (PATH, "", False),
    ],
)
def test_polling_url_against_base(url: str, base: str, accepted: bool) -> None:
    assert polling_url_matches(url, base, ROUTE, "job-1") is accepted


@pytest.mark.parametrize(
    ("remote_id", "route", "accepted"),
    [
        ("job-1", ROUTE, True),
        ("a.b:c_d-9", "/api/workspace/functions/jobs/{id}", True),
        (".", ROUTE, False),
        ("..", ROUTE, False),
        ("a/b", ROUTE, False),
        ("", ROUTE, False),
        ("x" * 201, ROUTE, False),
        ("job 1", ROUTE, False),
        ("job-1", "/api/workspace/functions/jobs/", False),
        ("job-1", "/api/{id}/{id}", False),
        ("job-1", "api/workspace/functions/jobs/{id}", False),
    ],
)
def test_polling_url_remote_id_and_route(remote_id: str, route: str, accepted: bool) -> None:
    url = route.replace("{id}", remote_id)
    assert polling_url_matches(url, BASE, route, remote_id) is accepted


@pytest.mark.parametrize(
    "args", [(None, BASE, ROUTE, "job-1"), (PATH, None, ROUTE, "job-1"), (PATH, BASE, ROUTE, 1)]
)
def test_polling_url_wrong_types(args: tuple[Any, ...]) -> None:
    assert polling_url_matches(*args) is False


def test_build_routes() -> None:
    route = "/api/workspace/admin/ui-project/builds/{id}"
    assert polling_url_matches("/api/workspace/admin/ui-project/builds/bld-1", BASE, route, "bld-1")
    assert not polling_url_matches(
        "/api/workspace/admin/net-operation-project/builds/bld-1", BASE, route, "bld-1"
    )


# --- properties -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.sampled_from(["JobId", "id", "Data", "StatusUrl", "location"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(body=json_values)
def test_extractors_never_raise(body: Any) -> None:
    remote_id = extract_remote_id(body)
    url = extract_polling_url(body)
    assert remote_id is None or (isinstance(remote_id, str) and remote_id)
    assert url is None or (isinstance(url, str) and url.strip())


schemes = st.sampled_from(["http", "HTTP", "https", "ftp", "", "javascript", "http:", "http:/"])
userinfo = st.sampled_from(["", "good@", "127.0.0.1:5080@", "a:b@", "@", "127.0.0.1%40"])
hosts = st.sampled_from(
    [
        "127.0.0.1",
        "127.0.0.2",
        "127.1",
        "evil.test",
        "localhost",
        "[::1]",
        "127.0.0.1.",
        "0x7f000001",
        "",
    ]
) | st.text(alphabet="abc.:@[]%/\\1270", max_size=12)
ports = st.sampled_from(["", ":5080", ":80", ":5081", ":", ":99999", ":x"])
segments = st.lists(
    st.sampled_from(
        [
            "api",
            "workspace",
            "functions",
            "jobs",
            "job-1",
            "..",
            ".",
            "%2e%2e",
            "%2F",
            "\\",
            "",
            "evil",
            "?x",
            "#y",
            "@",
        ]
    ),
    max_size=7,
)
suffixes = st.sampled_from(["", "/", "?", "?x=1", "#", "#f", "%00", "/..", "\\"])


@settings(max_examples=400, deadline=None)
@given(
    scheme=schemes,
    user=userinfo,
    host=hosts,
    port=ports,
    path=segments,
    suffix=suffixes,
    exact=st.booleans(),
)
def test_never_accepts_another_host(
    scheme: str, user: str, host: str, port: str, path: list[str], suffix: str, exact: bool
) -> None:
    route_path = PATH if exact else "/" + "/".join(path)
    url = f"{scheme}://{user}{host}{port}{route_path}{suffix}"
    if polling_url_matches(url, BASE, ROUTE, "job-1"):
        parts = urlsplit(url)
        assert (parts.hostname, parts.port, parts.username) == ("127.0.0.1", 5080, None)
        assert parts.path == PATH and not parts.query and not parts.fragment


@settings(max_examples=400, deadline=None)
@given(
    url=st.text(max_size=80)
    | st.builds(lambda a, b: a + PATH + b, st.text(max_size=20), st.text(max_size=10))
)
def test_arbitrary_text_is_accepted_only_as_the_exact_route(url: str) -> None:
    if polling_url_matches(url, BASE, ROUTE, "job-1"):
        assert url == PATH or urlsplit(url).hostname == "127.0.0.1"
        assert url.endswith(PATH) and "@" not in url
