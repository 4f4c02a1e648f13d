"""Fixtures shared by every test folder: a PostgreSQL server, and a clean place in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.pgserver import fresh_name, server_dsn, with_param


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a PostgreSQL server (see tests/pgserver.py: CI's, or this session's own)."""
    with server_dsn() as dsn:
        yield dsn


@pytest.fixture
async def postgres_dsn(postgres_server: str) -> AsyncIterator[str]:
    """A DSN whose search_path is a new, empty schema, dropped after the test."""
    import asyncpg  # type: ignore[import-untyped]

    schema = fresh_name("t")
    conn = await asyncpg.connect(postgres_server)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
        yield with_param(postgres_server, "search_path", schema)
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        await conn.close()
