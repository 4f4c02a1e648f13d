"""The SQL stores' schemas: numbered migrations, applied at open in one transaction.

The SQL is package data, one ``NNN_name.sql`` file per version: ``migrations/``
for SQLite, ``pg_migrations/`` for PostgreSQL. Each database records the
versions applied in ``schema_version``; a database newer than this build is
refused, so an old build never writes to a schema it does not know.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import re
import sqlite3
import time
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.store import pg_queries, queries

_MIGRATION_NAME = re.compile(r"^(\d+)_(\w+)\.sql$")


def numbered_migrations(folder: str) -> list[tuple[int, str, str]]:
    """The numbered ``<folder>/NNN_name.sql`` files shipped as package data, in order
    (``migrations`` for SQLite, ``pg_migrations`` for PostgreSQL)."""
    found: list[tuple[int, str, str]] = []
    for entry in (importlib.resources.files("orchestrator.store") / folder).iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    if [version for version, _, _ in found] != list(range(1, len(found) + 1)):
        raise StoreError(f"store migrations are not numbered 1..n: {[n for _, n, _ in found]}")
    return found


def _refuse_newer(current: int, known: int) -> None:
    if current > known:
        raise StoreError(
            f"store schema version {current} is newer than this build knows"
            f" ({known}): refusing to open it"
        )


# -- SQLite ---------------------------------------------------------------------------


def migrate_sqlite(conn: sqlite3.Connection) -> None:
    """Apply the migrations newer than the recorded schema version, all in one transaction."""
    migrations = numbered_migrations("migrations")
    # Off while the schema changes (SQLite's procedure for rebuilding a table: a
    # DROP would otherwise cascade), checked before the commit, on again after.
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(queries.CREATE_SCHEMA_VERSION)
        current = conn.execute(queries.SCHEMA_VERSION).fetchone()[0]
        _refuse_newer(current, len(migrations))
        for version, name, script in migrations[current:]:
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute(queries.RECORD_MIGRATION, (version, name, time.time()))
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise StoreError(f"store migration left dangling references: {broken[:3]}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _statements(script: str) -> list[str]:
    """Split a migration into statements, so that it runs inside our own transaction
    (``executescript`` would commit first)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    leftover = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if leftover:
        raise StoreError(f"incomplete SQL statement in a migration: {leftover[:80]!r}")
    return statements


# -- PostgreSQL -----------------------------------------------------------------------


async def migrate_postgres(conn: Any) -> None:
    """Apply the migrations newer than the recorded version, in one transaction.

    Replicas starting together serialise on an advisory lock: the first applies
    them, the others then find nothing left to do.
    """
    known = numbered_migrations("pg_migrations")
    async with conn.transaction():
        await conn.execute(f"SELECT pg_advisory_xact_lock({pg_queries.MIGRATION_LOCK_KEY})")
        await conn.execute(pg_queries.CREATE_SCHEMA_VERSION)
        current = int(await conn.fetchval(pg_queries.SCHEMA_VERSION))
        _refuse_newer(current, len(known))
        for version, name, script in known[current:]:
            await conn.execute(script)  # a whole script: the simple query protocol
            await conn.execute(pg_queries.RECORD_MIGRATION, version, name, time.time())
