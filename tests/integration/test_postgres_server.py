"""The PostgreSQL server the tests run against: reachable, on loopback, new enough."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]


async def test_the_server_answers_on_loopback(postgres_dsn: str) -> None:
    conn = await asyncpg.connect(postgres_dsn)
    try:
        version = await conn.fetchval("SHOW server_version_num")
        address = await conn.fetchval("SELECT host(inet_server_addr())")
        schema = await conn.fetchval("SELECT current_schema()")
    finally:
        await conn.close()
    assert int(version) >= 130000  # FOR UPDATE SKIP LOCKED, identity columns
    assert address == "127.0.0.1"
    assert schema is not None and schema.startswith("t_")
