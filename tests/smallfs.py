"""A real, small filesystem (a tmpfs mount) for the disk-full tests."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``mount_point`` for the duration.

    Mounting needs root. Outside CI a machine that cannot mount skips with the
    reason; in CI (where we are root) not being able to is a failure, so the
    disk-full behaviour is never silently left untested.
    """
    mount_point.mkdir(parents=True, exist_ok=True)
    problem = None
    if shutil.which("mount") is None:
        problem = "no mount command to create a small filesystem"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            problem = f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path, limit_bytes: int) -> Path:
    """Write a filler file until the filesystem refuses one more byte."""
    filler = directory / "filler"
    block = b"\0" * 4096
    with filler.open("wb", buffering=0) as out:
        for _ in range(limit_bytes // len(block)):
            try:
                out.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        else:
            pytest.fail("the small filesystem never filled up")
        with contextlib.suppress(OSError):
            for _ in range(4096):
                out.write(b"\0")
    return filler
