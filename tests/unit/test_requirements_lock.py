"""requirements.lock, the exact versions the container image installs, agrees with pyproject.

The image installs the lock with ``--require-hashes`` and the wheel with
``--no-deps``, then ``pip check`` fails the build on anything missing; this
catches the usual slip before a build does: a dependency added to
pyproject.toml and the lock not refreshed.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
# The image's platform: the markers of the lock and of pyproject are judged for it.
IMAGE = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11",
         "python_full_version": "3.11.0", "implementation_name": "cpython",
         "platform_python_implementation": "CPython", "os_name": "posix",
         "platform_machine": "x86_64"}  # fmt: skip
REFRESH = (
    "uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes"
    " -o requirements.lock"
)


def pins() -> dict[str, tuple[str, Marker | None, int]]:
    """name -> (version, marker, number of hashes), one per requirement of the lock."""
    text = LOCK.read_text()
    out: dict[str, tuple[str, Marker | None, int]] = {}
    for block in re.split(r"\n(?=\S)", text):
        if block.startswith("#") or not block.strip():
            continue
        head = block.split("\\", 1)[0].strip()
        req = Requirement(head)
        [spec] = req.specifier
        assert spec.operator == "==", head
        out[canonicalize_name(req.name)] = (spec.version, req.marker, block.count("--hash=sha256:"))
    return out


def test_every_pin_is_exact_and_hashed() -> None:
    found = pins()
    assert len(found) > 10
    assert all(hashes > 0 for _, _, hashes in found.values()), found


def test_every_runtime_dependency_of_pyproject_is_pinned_within_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = pins()
    for line in project["dependencies"]:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(IMAGE):
            continue
        name = canonicalize_name(req.name)
        assert name in found, f"{req.name} is not in requirements.lock: refresh it ({REFRESH})"
        version, marker, _ = found[name]
        assert marker is None or marker.evaluate(IMAGE), (name, marker)
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, outside {req.specifier}: refresh it"
        )


def test_the_lock_says_how_it_was_made_and_the_docs_say_how_to_refresh_it() -> None:
    assert REFRESH in LOCK.read_text().split("\n", 3)[1]
    assert REFRESH in (REPO / "docs" / "operations.md").read_text()
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "pip install --require-hashes --no-deps -r /tmp/requirements.lock" in dockerfile
