"""A PostgreSQL server for the tests that need one.

Under CI, ``.ci/run`` starts a throwaway cluster (``scripts/pg-cluster.sh``) and
exports its DSN as ``ORCH_TEST_POSTGRES_DSN``; a CI run without it fails rather
than skipping, so a missing server cannot pass silently. Elsewhere the session
starts its own cluster in a temporary directory when Debian's server binaries
are installed, and skips (saying why) when they are not.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "scripts" / "pg-cluster.sh"
DSN_ENV = "ORCH_TEST_POSTGRES_DSN"
DIR_ENV = "ORCH_TEST_POSTGRES_DIR"  # the cluster's directory, for scripts/pg-cluster.sh restart


def pg_binaries() -> bool:
    return any(os.access(p, os.X_OK) for p in glob.glob("/usr/lib/postgresql/*/bin/initdb"))


@contextmanager
def server_dsn() -> Iterator[str]:
    """The DSN of a running server: CI's, or one started for this session."""
    given = os.environ.get(DSN_ENV)
    if given:
        yield given
        return
    reason = f"no PostgreSQL: set {DSN_ENV} or run scripts/install-postgresql.sh"
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the PostgreSQL tests)")
    if not pg_binaries():
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="orch-pg-") as tmp:
        os.chmod(tmp, 0o755)  # the cluster's owner (postgres, under root) must reach it
        directory = Path(tmp) / "cluster"
        done = subprocess.run(
            ["bash", str(CLUSTER), "start", str(directory)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.fail(f"cannot start a PostgreSQL cluster: {done.stderr.strip()}")
        os.environ[DIR_ENV] = str(directory)  # a restart test restarts it by its directory
        try:
            yield done.stdout.strip().splitlines()[-1]
        finally:
            os.environ.pop(DIR_ENV, None)
            subprocess.run(["bash", str(CLUSTER), "stop", str(directory)], timeout=120, check=False)


def with_param(dsn: str, key: str, value: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}{key}={value}"


def fresh_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def fresh_schema(server: str) -> AsyncIterator[str]:
    """A DSN whose search_path is a new, empty schema, dropped afterwards."""
    import asyncpg  # type: ignore[import-untyped]

    schema = fresh_name("t")
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    yield with_param(server, "search_path", schema)
    # A connection of its own: a test may have restarted the server meanwhile.
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        await conn.close()
