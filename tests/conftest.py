"""Fixtures shared by every test folder: a PostgreSQL server, and a clean place in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.pgserver import fresh_schema, server_dsn


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a PostgreSQL server (see tests/pgserver.py: CI's, or this session's own)."""
    with server_dsn() as dsn:
        yield dsn


@pytest.fixture
async def postgres_dsn(postgres_server: str) -> AsyncIterator[str]:
    """A DSN whose search_path is a new, empty schema, dropped after the test."""
    async with fresh_schema(postgres_server) as dsn:
        yield dsn
