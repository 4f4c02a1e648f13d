"""docs/events.md's signature checks, run as written against a request the service signs.

The reference-library snippet needs a received request, so the docs test skips
it; here it runs in a fresh interpreter with only ``raw_body_bytes`` and
``request_headers`` given, as a receiver would have them (so a missing import
fails). The by-hand ``verify`` is run on the same request.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.events.attempt import secret_key, webhook_headers

EVENTS = Path(__file__).resolve().parents[2] / "docs" / "events.md"
SECRET = "whsec_" + base64.b64encode(b"docs-snippet-secret-of-32-bytes!").decode()

RUN = """
import json, sys
given = json.load(open(sys.argv[1]))
raw_body_bytes = given["body"].encode()
request_headers = given["headers"]
for snippet in given["snippets"]:
    exec(snippet)
print(json.dumps({"event_id": event["id"], "by_hand": verify(
    given["secret"], request_headers, raw_body_bytes)}))
"""


def _snippet(after: str) -> str:
    text = EVENTS.read_text()
    start = text.index(after)
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)  # type: ignore[union-attr]


def test_the_verify_snippets_run_as_written(tmp_path: Path) -> None:
    body = b'{"specversion":"1.0","id":"evt-1","type":"t","source":"s"}'
    key = secret_key(SECRET)
    assert key is not None
    headers = webhook_headers(key, "evt-1", int(time.time()), body)
    given = {
        "body": body.decode(),
        "headers": headers,
        "secret": SECRET,
        "snippets": [_snippet("With the reference library"), _snippet("By hand:")],
    }
    (tmp_path / "given.json").write_text(json.dumps(given))
    (tmp_path / "run.py").write_text(RUN)
    env = {**os.environ, "ORCH_SINK_SECRET": SECRET}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), str(tmp_path / "given.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"event_id": "evt-1", "by_hand": True}
