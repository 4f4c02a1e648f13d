"""The ``million`` profile: a million trackings operated, start to stop to start.

Function jobs that stay Queued for the whole run are taken in by batch intake
(1,000 a request, four senders) on a workspace limited to 5,000 requests/s with
``max_delay_s`` 600, the service settles (every tracking read once, the writes
done), is stopped with SIGTERM and started again on the same file. Reported,
all from this one run on this one machine:

- intake/s; RSS per active tracking once settled (above the idle service's RSS);
- SIGTERM to exit at 1,000,000 and at 10,000 (a service of its own, the same steps);
- the bare read: the active rows into tuples by ``sqlite3`` on the same file,
  right before the restart (``SELECT *``, all columns, no service code), and
  the same of only the columns the service's own pass reads;
- the restart: process start to first ``/healthz`` 200, to ready, and the peak
  RSS while loading; after it, the active count, and each sampled tracking's
  ``polls`` against what the service showed before the SIGTERM.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.phases import Params
from bench.procs import Serve, Simulator, free_port, rss_bytes, serve_config
from orchestrator.store.queries import ACTIVE_ALL

RATE = 5_000.0
POLLING = {"initial_delay_s": 1.0, "max_delay_s": 600.0, "jitter": 0.1}
SAMPLE = 1_000  # trackings whose polls are compared across the restart
BARE_READ = "SELECT * FROM trackings WHERE state = 'active'"


def _peak_rss(pid: int) -> int:
    """The process's peak resident set so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


async def _metrics(session: aiohttp.ClientSession, serve: Serve) -> dict[str, float]:
    """Sums of every sample by metric name."""
    async with session.get(f"{serve.url}/metrics") as resp:
        text = await resp.text()
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            sums[name] = sums.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return sums


async def _intake(session: aiohttp.ClientSession, serve: Serve, ids: list[str]) -> list[str]:
    """Batch intake, 1,000 an item list, four senders; the tracking ids made."""
    url = f"{serve.url}/v1/trackings/batch"
    chunks = iter([ids[i : i + 1000] for i in range(0, len(ids), 1000)])
    made: list[str] = []

    async def sender() -> None:
        for chunk in chunks:
            items = [{"kind": "function_job", "remote_id": r, "timeout_s": 86_400} for r in chunk]
            body = orjson.dumps({"items": items})
            headers = {"Content-Type": "application/json"}
            async with session.post(url, data=body, headers=headers) as resp:
                answer = orjson.loads(await resp.read())
            for item in answer["items"]:
                if item["status"] not in (200, 201):
                    raise RuntimeError(f"intake refused: {item}")
                made.append(item["tracking"]["tracking_id"])

    await asyncio.gather(*(sender() for _ in range(4)))
    return made


async def _settle(session: aiohttp.ClientSession, serve: Serve, count: int) -> float:
    """Until every tracking was read once and the writes are done; seconds taken."""
    t0 = time.monotonic()
    deadline = t0 + max(600.0, 3 * count / RATE)
    while time.monotonic() < deadline:
        m = await _metrics(session, serve)
        if m.get("orchestrator_polls_total", 0) >= count and not m.get(
            "orchestrator_write_backlog"
        ):
            return time.monotonic() - t0
        await asyncio.sleep(1.0)
    raise RuntimeError(f"{count} trackings not settled within {deadline - t0:.0f} s")


async def _polls(session: aiohttp.ClientSession, serve: Serve, ids: list[str]) -> list[int]:
    out = []
    for tracking_id in ids:
        async with session.get(f"{serve.url}/v1/trackings/{tracking_id}") as resp:
            out.append(int((await resp.json())["polls"]))
    return out


async def _stop(serve: Serve) -> tuple[float, int]:
    """SIGTERM to exit: seconds, exit code."""
    t0 = time.monotonic()
    code = await asyncio.to_thread(serve.terminate)
    return time.monotonic() - t0, code


async def _run(
    session: aiohttp.ClientSession, sim: Simulator, ids: list[str], workdir: Path, name: str
) -> tuple[Serve, dict[str, Any], list[str]]:
    """A service on its own file: idle RSS, intake, settle; left running."""
    port = free_port()
    cfg = serve_config(
        workdir / f"{name}.toml", port=port, db=workdir / f"{name}.db", sim_url=sim.url,
        polling=POLLING, max_in_flight=64, rate=RATE,
    )  # fmt: skip
    serve = Serve(cfg, port, workdir / f"{name}.log")
    await serve.start(session)
    idle = rss_bytes(serve.pid)
    t0 = time.monotonic()
    made = await _intake(session, serve, ids)
    intake_s = time.monotonic() - t0
    settle_s = await _settle(session, serve, len(ids))
    settled = rss_bytes(serve.pid)
    figures = {
        "intake_per_s": len(ids) / intake_s,
        "settle_s": settle_s,
        "rss_idle_bytes": idle,
        "rss_settled_bytes": settled,
        "rss_bytes_per_tracking": (settled - idle) / len(ids),
    }
    return serve, figures, made


async def _restart(session: aiohttp.ClientSession, serve: Serve) -> dict[str, float]:
    """Spawn again on the same file: first /healthz, ready, peak RSS of the load."""
    serve.spawn()
    t0 = time.monotonic()
    healthz = ready = None
    loading_seen = 0
    async with asyncio.timeout(600):
        while ready is None:
            assert serve.proc is not None
            if serve.proc.poll() is not None:
                raise RuntimeError(f"serve exited {serve.proc.returncode}")
            try:
                if healthz is None:
                    async with session.get(f"{serve.url}/healthz") as resp:
                        if resp.status == 200:
                            healthz = time.monotonic() - t0
                async with session.get(f"{serve.url}/readyz") as resp:
                    if resp.status == 200:
                        ready = time.monotonic() - t0
                    elif (await resp.json()).get("status") == "loading":
                        loading_seen += 1
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.02)
    assert healthz is not None
    return {
        "first_healthz_s": healthz,
        "ready_s": ready,
        "loading_answers": loading_seen,
        "load_peak_rss_bytes": _peak_rss(serve.pid),
    }


def _bare_read(db: Path, sql: str = BARE_READ) -> tuple[float, int]:
    t0 = time.monotonic()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(sql).fetchall()
    finally:
        conn.close()
    return time.monotonic() - t0, len(rows)


async def million_profile(
    session: aiohttp.ClientSession, sim: Simulator, ids: list[str], p: Params, workdir: Path
) -> dict[str, Any]:
    report: dict[str, Any] = {}
    small, _, _ = await _run(session, sim, ids[: p.small], workdir, "small")
    report["sigterm_exit_small_s"], report["sigterm_exit_small_code"] = await _stop(small)
    report["small_trackings"] = p.small
    big_ids = ids[p.small :][: p.trackings]
    big, figures, made = await _run(session, sim, big_ids, workdir, "big")
    report.update(figures)
    sample = random.Random(1).sample(made, min(SAMPLE, len(made)))
    before = await _polls(session, big, sample)
    report["sigterm_exit_s"], report["sigterm_exit_code"] = await _stop(big)
    report["bare_read_s"], report["bare_read_rows"] = await asyncio.to_thread(
        _bare_read, workdir / "big.db"
    )
    # The same, of only the columns the service's own pass reads (no body it has a
    # digest for): the part of the ratio owed to reading less.
    report["bare_read_service_columns_s"], _ = await asyncio.to_thread(
        _bare_read, workdir / "big.db", ACTIVE_ALL
    )
    report.update(await _restart(session, big))
    report["ready_over_bare_read"] = report["ready_s"] / report["bare_read_s"]
    report["ready_over_service_columns_read"] = (
        report["ready_s"] / report["bare_read_service_columns_s"]
    )
    m = await _metrics(session, big)
    report["active_after_restart"] = m.get("orchestrator_trackings_active", 0.0)
    after = await _polls(session, big, sample)
    report["polls_behind_after_restart"] = sum(
        1 for b, a in zip(before, after, strict=True) if a < b
    )
    report["sigterm_exit_again_s"], report["sigterm_exit_again_code"] = await _stop(big)
    return report


def million_table(r: dict[str, Any]) -> str:
    n = r["parameters"]["trackings"]
    rows = [
        ("intake_per_s", "batch intake, trackings/s"),
        ("settle_s", "intake end to every tracking read once, s"),
        ("rss_bytes_per_tracking", f"RSS per active tracking at {n:,}, bytes (<= 1,000)"),
        ("rss_settled_bytes", "  RSS settled, bytes"),
        ("rss_idle_bytes", "  RSS idle (before intake), bytes"),
        ("sigterm_exit_s", f"SIGTERM to exit at {n:,}, s"),
        ("sigterm_exit_code", "  exit code"),
        ("sigterm_exit_small_s", f"SIGTERM to exit at {r['small_trackings']:,}, s"),
        ("bare_read_s", "bare sqlite3 read of the active rows, s"),
        ("bare_read_rows", "  rows"),
        ("bare_read_service_columns_s", "  the same, of the service's columns only, s"),
        ("first_healthz_s", "restart: process start to first /healthz 200, s"),
        ("ready_s", "restart: process start to ready, s"),
        ("ready_over_bare_read", "  ready / bare read (<= 2)"),
        ("ready_over_service_columns_read", "  ready / read of the service's columns"),
        ("loading_answers", "  /readyz answers 'loading' seen"),
        ("load_peak_rss_bytes", "peak RSS up to ready, bytes"),
        ("active_after_restart", "active trackings after the restart"),
        ("polls_behind_after_restart", f"sampled trackings whose polls went back (of {SAMPLE})"),
        ("sigterm_exit_again_s", "SIGTERM to exit after the restart, s"),
        ("elapsed_s", "benchmark wall time, s"),
    ]
    width = max(len(label) for _, label in rows)
    load = "/".join(f"{x:.2f}" for x in r["loadavg_start"])
    lines = [f"profile million: {n:,} trackings, {r['cpu_count']} cores, load {load}"]
    for key, label in rows:
        value = r.get(key)
        text = f"{value:,.3f}" if isinstance(value, float) and abs(value) < 100 else value
        text = f"{value:,.0f}" if isinstance(value, float) and abs(value) >= 100 else text
        lines.append(f"  {label:<{width}}  {text}")
    return "\n".join(lines)


def million_targets(r: dict[str, Any]) -> dict[str, bool]:
    return {
        "first_healthz_within_1s": r["first_healthz_s"] <= 1.0,
        "ready_within_2x_bare_read": r["ready_over_bare_read"] <= 2.0,
        "sigterm_constant": r["sigterm_exit_s"] <= r["sigterm_exit_small_s"] + 2.0
        and r["sigterm_exit_code"] == 0,
        "active_exact": r["active_after_restart"] == r["parameters"]["trackings"],
        "polls_kept": r["polls_behind_after_restart"] == 0,
        "rss_per_tracking": r["rss_bytes_per_tracking"] <= 1000,
    }
