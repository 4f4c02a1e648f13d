"""The container memory limit read from the process's cgroup, v1 and v2."""

from __future__ import annotations

from pathlib import Path

from orchestrator.memlimit import memory_limit


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_own_group(tmp_path: Path) -> None:
    _write(tmp_path / "proc", "0::/kubepods/pod1/c1\n")
    _write(tmp_path / "cg" / "kubepods/pod1/c1" / "memory.max", "536870912\n")
    assert memory_limit(tmp_path / "cg", tmp_path / "proc") == 512 << 20


def test_cgroup_v2_mounted_at_the_root_in_a_container(tmp_path: Path) -> None:
    _write(tmp_path / "proc", "0::/\n")
    _write(tmp_path / "cg" / "memory.max", "1073741824\n")
    assert memory_limit(tmp_path / "cg", tmp_path / "proc") == 1 << 30


def test_cgroup_v1(tmp_path: Path) -> None:
    _write(tmp_path / "proc", "4:memory:/docker/abc\n0::/\n")
    _write(tmp_path / "cg" / "memory" / "docker/abc" / "memory.limit_in_bytes", "268435456\n")
    assert memory_limit(tmp_path / "cg", tmp_path / "proc") == 256 << 20


def test_no_limit(tmp_path: Path) -> None:
    _write(tmp_path / "proc", "0::/\n")
    _write(tmp_path / "cg" / "memory.max", "max\n")
    assert memory_limit(tmp_path / "cg", tmp_path / "proc") is None
    _write(tmp_path / "proc1", "4:memory:/\n")
    _write(tmp_path / "cg1" / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")
    assert memory_limit(tmp_path / "cg1", tmp_path / "proc1") is None
    assert memory_limit(tmp_path / "none", tmp_path / "missing") is None
