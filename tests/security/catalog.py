"""Hostile inputs, named, each with what the service must answer.

Used by the security tests and fired during chaos runs. Every entry here must be
refused with a 4xx problem: none of them may become a tracking.
"""

from __future__ import annotations

from typing import Any

# Remote ids built to leave the status route once substituted into its path.
ESCAPING_IDS = [
    "..",
    ".",
    "...",
    "../admin",
    "..%2fadmin",
    "%2e%2e",
    "%2e%2e%2fadmin",
    "a/b",
    "a?x=1",
    "a#frag",
    "a\\b",
    "..\\..\\x",
    "\u2024\u2024",  # ONE DOT LEADER, looks like ".."
    "\uff0e\uff0e",  # FULLWIDTH FULL STOP
    "a\u200bb",  # zero-width space
    "a b",
    "a\r\nX-Injected: 1",
    "a\x00b",
    "",
    "x" * 201,
    "J-1/../../../swagger/v1/swagger.json",
    "J-1;x",
    "J-1%00",
    "@evil.example",
    "J-1\u202e",  # RTL override
]


# Polling URLs in an enqueue response that point anywhere but the workspace route.
def foreign_polling_urls(base: str, route: str) -> list[str]:
    host_port = base.split("://", 1)[1]
    port = host_port.rsplit(":", 1)[1]
    return [
        "http://evil.example" + route,
        f"http://{host_port}@evil.example{route}",
        f"http://good@{host_port}{route}",
        f"http://127.0.0.1.evil.example:{port}{route}",
        f"http://localhost.evil.example:{port}{route}",
        f"http://2130706433:{port}{route}",  # 127.0.0.1 in decimal
        f"http://0177.0.0.1:{port}{route}",  # octal
        f"http://0x7f.0.0.1:{port}{route}",  # hex
        f"http://[::1]:{port}{route}",
        f"http://[::ffff:127.0.0.1]:{port}{route}",
        f"https://{host_port}{route}",
        f"{base}{route}?redirect=http://evil.example",
        f"{base}{route}#x",
        f"{base}/redirect?to={route}",
        f"{base}{route}/../../../_sim/reset",
        f"{base}%2F..%2F{route}",
        f"//evil.example{route}",
        f"\\\\evil.example{route}",
        f"{base}{route}\r\nX-Injected: 1",
        f"ftp://{host_port}{route}",
        f"javascript:alert(1)//{route}",
    ]


# Callback URLs outside the allowlist (``allowed`` is the single allowed prefix).
def foreign_callbacks(allowed: str) -> list[str]:
    bare = allowed.split("://", 1)[1]
    return [
        "http://evil.example/hook",
        f"http://{bare}@evil.example/",
        f"http://user:pw@{bare}/x",
        f"{allowed}.evil.example/",
        f"{allowed}evil",
        f"{allowed}/../../other",
        f"{allowed}/%2e%2e/%2e%2e/other",
        f"{allowed}/./../other",
        f"{allowed}/x/..",
        f"{allowed}/x\r\nX-Injected: 1",
        f"{allowed}/x\nHost: evil.example",
        f"{allowed}/x\\@evil.example",
        f"{allowed}/\u0000",
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/_INFO",
        "http://2130706433/hook",
        "http://[::1]/hook",
        f"HTTP://{bare.upper()}/x",
        "",
    ]


def hostile_intake_bodies(sim_url: str, allowed_callback: str) -> list[tuple[str, Any]]:
    """(name, JSON body) pairs; every one must answer 4xx and create nothing."""
    route = "/api/workspace/functions/jobs/{id}"
    out: list[tuple[str, Any]] = []
    for rid in ESCAPING_IDS:
        out.append((f"remote_id {rid!r}", {"kind": "function_job", "remote_id": rid}))
        out.append(
            (f"enqueue JobId {rid!r}", {"kind": "function_job", "enqueue_response": {"JobId": rid}})
        )
    for url in foreign_polling_urls(sim_url, route.replace("{id}", "J-hostile")):
        body = {"JobId": "J-hostile", "StatusUrl": url}
        out.append((f"polling url {url!r}", {"kind": "function_job", "enqueue_response": body}))
    for url in foreign_callbacks(allowed_callback):
        out.append(
            (
                f"callback {url!r}",
                {"kind": "function_job", "remote_id": "J-cb", "callback_url": url},
            )
        )
    out += [
        ("not an object", [1, 2, 3]),
        ("null", None),
        ("string", "function_job"),
        ("unknown kind", {"kind": "function_jobs", "remote_id": "J-1"}),
        ("kind as number", {"kind": 0, "remote_id": "J-1"}),
        ("remote_id as number", {"kind": "function_job", "remote_id": 12}),
        ("unknown field", {"kind": "function_job", "remote_id": "J-1", "evil": True}),
        ("proto pollution", {"kind": "function_job", "remote_id": "J-1", "__proto__": {}}),
        ("unknown workspace", {"kind": "function_job", "remote_id": "J-1", "workspace": "../x"}),
        (
            "workspace with CRLF",
            {"kind": "function_job", "remote_id": "J-1", "workspace": "default\r\nX: 1"},
        ),
        ("negative timeout", {"kind": "function_job", "remote_id": "J-1", "timeout_s": -1}),
        ("NaN-ish timeout", {"kind": "function_job", "remote_id": "J-1", "timeout_s": "NaN"}),
        ("huge timeout", {"kind": "function_job", "remote_id": "J-1", "timeout_s": 1e308}),
        ("bool timeout", {"kind": "function_job", "remote_id": "J-1", "timeout_s": True}),
        (
            "deadline without zone",
            {"kind": "function_job", "remote_id": "J-1", "deadline_at": "2099-01-01T00:00:00"},
        ),
        (
            "deadline year 10000",
            {"kind": "function_job", "remote_id": "J-1", "deadline_at": "10000-01-01T00:00:00Z"},
        ),
        (
            "both deadlines",
            {
                "kind": "function_job",
                "remote_id": "J-1",
                "timeout_s": 5,
                "deadline_at": "2099-01-01T00:00:00Z",
            },
        ),
        (
            "too many labels",
            {
                "kind": "function_job",
                "remote_id": "J-1",
                "labels": {f"k{i}": "v" for i in range(33)},
            },
        ),
        ("label key CRLF", {"kind": "function_job", "remote_id": "J-1", "labels": {"a\r\nb": "v"}}),
        (
            "label value not string",
            {"kind": "function_job", "remote_id": "J-1", "labels": {"a": 1}},
        ),
        (
            "label value huge",
            {"kind": "function_job", "remote_id": "J-1", "labels": {"a": "x" * 201}},
        ),
        ("notify unknown", {"kind": "function_job", "remote_id": "J-1", "notify": "everything"}),
        ("enqueue not object", {"kind": "function_job", "enqueue_response": "J-1"}),
        ("enqueue without id", {"kind": "function_job", "enqueue_response": {"Status": 0}}),
        (
            "enqueue id mismatch",
            {"kind": "function_job", "remote_id": "J-1", "enqueue_response": {"JobId": "J-2"}},
        ),
        (
            "enqueue id bool",
            {"kind": "function_job", "enqueue_response": {"JobId": True}},
        ),
        (
            "nested enqueue id escaping",
            {"kind": "function_job", "enqueue_response": {"Data": {"Id": "../../x"}}},
        ),
    ]
    return out


def hostile_raw_bodies() -> list[tuple[str, bytes]]:
    """(name, raw bytes) sent as application/json; each must answer 4xx."""
    deep = 100_000
    return [
        ("100k-deep arrays", b"[" * deep + b"]" * deep),
        ("100k-deep objects", b'{"a":' * deep + b"1" + b"}" * deep),
        (
            "deep enqueue_response",
            b'{"kind":"function_job","enqueue_response":' + b'{"a":' * 5000 + b"1" + b"}" * 5001,
        ),
        ("truncated", b'{"kind": "function_job", "remote_id": "J-'),
        ("overlong utf-8 slash", b'{"kind":"function_job","remote_id":"a\xc0\xafb"}'),
        ("invalid utf-8", b'{"kind":"function_job","remote_id":"\xff\xfe"}'),
        ("lone surrogate", b'{"kind":"function_job","remote_id":"\\ud800"}'),
        ("NUL escape in id", b'{"kind":"function_job","remote_id":"a\\u0000b"}'),
        ("raw NUL", b'{"kind":"function_job","remote_id":"a\x00b"}'),
        ("duplicate keys", b'{"kind":"function_job","remote_id":"J-1","remote_id":"../x"}'),
        ("NaN", b'{"kind":"function_job","remote_id":"J-1","timeout_s":NaN}'),
        ("Infinity", b'{"kind":"function_job","remote_id":"J-1","timeout_s":Infinity}'),
        (
            "huge number",
            b'{"kind":"function_job","remote_id":"J-1","timeout_s":1' + b"0" * 5000 + b"}",
        ),
        ("BOM", b'\xef\xbb\xbf{"kind":"function_job","remote_id":"J-1","x":1}'),
        ("empty", b""),
        ("whitespace", b"   \n\t  "),
        ("trailing garbage", b'{"kind":"function_job","remote_id":"J-1"} x'),
    ]
