"""The memory limit the process runs under, read from its cgroup (a container's limit).

cgroup v2 names it ``memory.max`` ("max": none); v1 ``memory.limit_in_bytes``
(a huge page-aligned number: none). Read once at start-up for the
``orchestrator_memory_limit_bytes`` gauge that the memory alert compares the
resident set with.
"""

from __future__ import annotations

from pathlib import Path

# v1 writes "no limit" as the largest page-aligned signed 64-bit value; anything
# above a petabyte is treated the same.
_UNLIMITED = 1 << 50


def _cgroup_dirs(root: Path, proc_cgroup: str) -> list[tuple[Path, str]]:
    """(directory, file name) to look at, the process's own cgroup first."""
    found: list[tuple[Path, str]] = []
    for line in proc_cgroup.splitlines():
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        rel = path.lstrip("/")
        if number == "0" and controllers == "":
            found.append((root / rel, "memory.max"))
        elif "memory" in controllers.split(","):
            found.append((root / "memory" / rel, "memory.limit_in_bytes"))
    # In a container the own cgroup is mounted at the root of the hierarchy.
    found += [(root, "memory.max"), (root / "memory", "memory.limit_in_bytes")]
    return found


def memory_limit(
    root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self/cgroup")
) -> int | None:
    """The cgroup memory limit in bytes; None when there is none or it cannot be read."""
    try:
        own = proc.read_text()
    except OSError:
        own = ""
    for directory, name in _cgroup_dirs(root, own):
        try:
            text = (directory / name).read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= _UNLIMITED:
            return None
        return int(text)
    return None
