"""The SQLite store's numbered migrations, applied in one transaction at open."""

from __future__ import annotations

import contextlib
import importlib.resources
import re
import sqlite3
import time

from orchestrator.errors import StoreError
from orchestrator.store import queries

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


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations newer than the recorded schema version, all in one transaction."""
    migrations = numbered_migrations("migrations")
    # Off while the schema changes (SQLite's procedure for rebuilding a table: a
    # DROP would otherwise cascade), checked before the commit, on again after.
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(queries.CREATE_SCHEMA_VERSION)
        current = conn.execute(queries.SCHEMA_VERSION).fetchone()[0]
        if current > len(migrations):
            raise StoreError(
                f"store schema version {current} is newer than this build knows"
                f" ({len(migrations)}): refusing to open it"
            )
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
