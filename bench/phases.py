"""The throughput phases: intake, saturation beside the baseline, restart, half saturation.

Each phase returns plain numbers; ``run.py`` strings them together and
``events_phase.py`` does the event-latency and duration-mix phase.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.procs import (
    REPO,
    CpuMark,
    Serve,
    Simulator,
    cpu_seconds,
    free_port,
    histogram_quantile,
    rss_bytes,
    scrape,
    serve_config,
)
from orchestrator.clock import parse_iso

JOB_STATUS = "/api/workspace/functions/jobs/"


@dataclass(slots=True)
class Params:
    name: str
    trackings: int
    singles: int  # of the trackings, how many arrive one per request
    concurrency: int  # baseline workers = the service's max_in_flight
    warmup_s: float
    window_s: float
    half_window_s: float
    restart_rate: float  # workspace limit during the restart phase
    events: int
    mix_scale: float
    single_clients: int = 32
    batch_clients: int = 4
    batch_size: int = 1000
    # turns each of the baseline and the saturated service take (see side_by_side)
    turns: int = 10
    # adaptive polling beside the backoff: jobs of the class mix, arriving over a span
    adaptive_jobs: int = 1000
    adaptive_arrive_s: float = 40.0
    # the million profile: the trackings of the service it compares a stop with
    small: int = 10_000


PROFILES = {
    "smoke": Params(
        "smoke", 300, 60, 16, 0.5, 1.0, 1.0, 1000, 40, 0.2, adaptive_jobs=100, adaptive_arrive_s=5.0
    ),
    "quick": Params("quick", 10_000, 1_500, 64, 1.0, 4.0, 4.0, 5_000, 400, 0.5),
    "full": Params(
        "full",
        100_000,
        5_000,
        64,
        2.0,
        10.0,
        15.0,
        12_000,
        2_000,
        1.0,
        adaptive_jobs=3000,
        adaptive_arrive_s=90.0,
    ),
    # bench/replicas_phase.py: 1, 2 and 3 replicas on one PostgreSQL, beside SQLite. 3,000:
    # at 10,000 the three replicas at half saturation read late (p99 2.4 s; performance.md).
    "replicas": Params("replicas", 3_000, 0, 64, 1.0, 6.0, 8.0, 5_000, 400, 0.5),
    # bench/million_phase.py: intake, settle, SIGTERM and restart at 1,000,000 (not in CI).
    "million": Params("million", 1_000_000, 0, 64, 0.0, 0.0, 0.0, 5_000, 0, 0.0),
}


class SimCpu:
    """The simulator's CPU share over a window: its CPU seconds / wall seconds."""

    def __init__(self, sim: Simulator) -> None:
        self.mark = CpuMark.take(sim.pid)

    def share(self) -> float:
        cpu, wall = self.mark.since()
        return cpu / wall if wall > 0 else 0.0


async def bulk_jobs(session: aiohttp.ClientSession, sim: str, count: int) -> list[str]:
    """Jobs that stay Queued for the whole run: every read is the same cheap cached body."""
    async with session.put(
        f"{sim}/_sim/profile", json={"job": {"pickup_s": 86_400, "duration_s": 1}}
    ) as resp:
        resp.raise_for_status()
    ids: list[str] = []
    while len(ids) < count:
        n = min(50_000, count - len(ids))
        async with session.post(
            f"{sim}/_sim/jobs/bulk", json={"count": n, "function_key": "bench.job"}
        ) as resp:
            resp.raise_for_status()
            ids += (await resp.json())["ids"]
    return ids


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        raw = f.read()
    return raw[raw.rindex(")") + 2]


async def _pause(pid: int) -> None:
    """SIGSTOP, and wait until the process has stopped (the signal is asynchronous)."""
    os.kill(pid, signal.SIGSTOP)
    async with asyncio.timeout(5):
        while _state(pid) != "T":
            await asyncio.sleep(0.0005)


class Baseline:
    """``bench/baseline.py`` in its own process, driven through its stdin."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(
        cls, client: str, sim: Simulator, ids: list[str], p: Params, workdir: Path
    ) -> Baseline:
        ids_file = workdir / f"ids-{client}.txt"
        ids_file.write_text("\n".join(ids) + "\n")
        args = [
            sys.executable, str(REPO / "bench" / "baseline.py"), "--client", client,
            "--url", sim.url, "--ids-file", str(ids_file), "--concurrency", str(p.concurrency),
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        return cls(proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def mark(self) -> dict[str, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"mark\n")
        async with asyncio.timeout(30):
            line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("bench/baseline.py exited")
        mark: dict[str, float] = orjson.loads(line)
        return mark

    async def stop(self) -> None:
        if self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"stop\n")
            try:
                async with asyncio.timeout(30):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def _sim_reads(session: aiohttp.ClientSession, sim: Simulator) -> float:
    """Requests the simulator has answered so far (it counts them itself)."""
    async with session.get(f"{sim.url}/_sim/stats") as resp:
        total: float = (await resp.json())["total"]
    return total


# The sides that take turns at saturation, in turn order, and their report prefixes:
# the bare aiohttp loop (the anchor), the bare loop of the service's own client
# library (the limit of its stack), the service.
SIDES = (("aiohttp", "baseline"), ("pyreqwest", "own_client"), ("service", "orchestrator"))
Turn = tuple[float, float, float, float]  # simulator-counted reads, CPU s, wall s, sim CPU s


async def side_by_side(
    session: aiohttp.ClientSession, serve: Serve, sim: Simulator, ids: list[str], p: Params,
    workdir: Path,
) -> dict[str, Any]:  # fmt: skip
    """The two bare loops and the saturated service, taking turns on the machine.

    All three processes are alive; two are stopped (SIGSTOP) while the third
    runs, in the order of ``SIDES``, ``p.turns`` rounds, ``window_s / turns``
    seconds a turn. In every turn the same things are measured for whichever
    side runs: the reads the simulator answered (only that side is sending),
    the side's CPU time over all its threads (``/proc``) and the wall time. The
    three turns of a round make a triple; each ratio is the median of the
    triples' ratios, and each side's own figures the medians of its turns. A
    shared machine changes speed from one second to the next: a round hit by
    outside load drops out of a median, while it would drag a total. The
    totals over all turns are in the report too (``saturation_totals``), as
    are the sides' own counts as a cross-check of the simulator's.
    """
    await _pause(serve.pid)
    loops = {}
    for client in ("aiohttp", "pyreqwest"):
        loops[client] = await Baseline.start(client, sim, ids, p, workdir)
        await loops[client].mark()  # answered once started, its ids loaded and polling
        await _pause(loops[client].pid)
    pids = {"aiohttp": loops["aiohttp"].pid, "pyreqwest": loops["pyreqwest"].pid,
            "service": serve.pid}  # fmt: skip
    turn_s = p.window_s / p.turns
    turns: dict[str, list[Turn]] = {side: [] for side, _ in SIDES}
    marks: dict[str, list[dict[str, float]]] = {"aiohttp": [], "pyreqwest": []}
    try:
        for round_ in range(p.turns):
            for side, _ in SIDES:
                pid = pids[side]
                os.kill(pid, signal.SIGCONT)
                if round_ == 0:
                    await asyncio.sleep(p.warmup_s / len(SIDES))
                if side == "service" and round_ in (0, p.turns - 1):
                    marks.setdefault("service", []).append(await scrape(session, serve.url))
                elif side != "service" and round_ in (0, p.turns - 1):
                    marks[side].append(await loops[side].mark())
                reads0 = await _sim_reads(session, sim)
                cpu0, sim0, t0 = cpu_seconds(pid), cpu_seconds(sim.pid), time.monotonic()
                await asyncio.sleep(turn_s)
                t1, cpu1, sim1 = time.monotonic(), cpu_seconds(pid), cpu_seconds(sim.pid)
                reads = await _sim_reads(session, sim) - reads0
                turns[side].append((reads, cpu1 - cpu0, t1 - t0, sim1 - sim0))
                if round_ == p.turns - 1:
                    if side == "service":
                        marks["service"].append(await scrape(session, serve.url))
                    else:
                        marks[side].append(await loops[side].mark())
                await _pause(pid)
    finally:
        for loop in loops.values():
            await loop.stop()
        os.kill(serve.pid, signal.SIGCONT)
    return _saturation_report(turns, marks, turn_s, p)


def _rate(t: Turn) -> float:
    return t[0] / t[2]


def _cpu_ms(t: Turn) -> float:
    return 1000 * t[1] / max(1.0, t[0])


def _round(triple: tuple[Turn, Turn, Turn]) -> dict[str, float]:
    """One round's figures, each side's under its report prefix."""
    out = {}
    for turn, (_, prefix) in zip(triple, SIDES, strict=True):
        out[f"{prefix}_polls_per_s"] = _rate(turn)
        out[f"{prefix}_cpu_ms_per_poll"] = _cpu_ms(turn)
    return out


def _saturation_report(
    turns: dict[str, list[Turn]], marks: dict[str, list[dict[str, float]]], turn_s: float,
    p: Params,
) -> dict[str, Any]:  # fmt: skip
    report: dict[str, Any] = {}
    totals: dict[str, float] = {}
    for side, prefix in SIDES:
        mine = turns[side]
        report[f"{prefix}_polls_per_s"] = statistics.median(_rate(t) for t in mine)
        report[f"{prefix}_cpu_ms_per_poll"] = statistics.median(_cpu_ms(t) for t in mine)
        polls = sum(t[0] for t in mine)
        totals[f"{prefix}_polls_per_s"] = polls / sum(t[2] for t in mine)
        totals[f"{prefix}_cpu_ms_per_poll"] = 1000 * sum(t[1] for t in mine) / polls
        report[f"{prefix}_polls_simulator_count"] = polls
        report[f"simulator_cpu_share_{prefix}"] = sum(t[3] for t in mine) / sum(t[2] for t in mine)
    triples = list(zip(turns["aiohttp"], turns["pyreqwest"], turns["service"], strict=True))
    for name, index in (("aiohttp", 0), ("own_client", 1)):
        report[f"ratio_vs_{name}"] = statistics.median(
            _rate(t[2]) / _rate(t[index]) for t in triples
        )
        report[f"cpu_ratio_vs_{name}"] = statistics.median(
            _cpu_ms(t[2]) / _cpu_ms(t[index]) for t in triples
        )
        prefix = "baseline" if name == "aiohttp" else name
        totals[f"ratio_vs_{name}"] = (
            totals["orchestrator_polls_per_s"] / totals[f"{prefix}_polls_per_s"]
        )
        totals[f"cpu_ratio_vs_{name}"] = (
            totals["orchestrator_cpu_ms_per_poll"] / totals[f"{prefix}_cpu_ms_per_poll"]
        )
    service = marks["service"]
    report.update(
        {
            "saturation_totals": totals,
            "saturation_rounds": [_round(t) for t in triples],
            "saturation_turns": p.turns,
            "saturation_turn_s": turn_s,
            # Each side's own count from its first turn to its last (with the moments
            # between turns), beside the simulator's count of its turns.
            "baseline_polls_own_count": marks["aiohttp"][1]["polls"] - marks["aiohttp"][0]["polls"],
            "own_client_polls_own_count": (
                marks["pyreqwest"][1]["polls"] - marks["pyreqwest"][0]["polls"]
            ),
            "orchestrator_polls_own_count": service[1]["polls"] - service[0]["polls"],
            "baseline_errors": marks["aiohttp"][1]["errors"],
            "own_client_errors": marks["pyreqwest"][1]["errors"],
            "orchestrator_cpu_share_saturation": sum(t[1] for t in turns["service"])
            / sum(t[2] for t in turns["service"]),
            "saturation_non_ok_polls": (service[1]["polls"] - service[0]["polls"])
            - (service[1]["polls_ok"] - service[0]["polls_ok"]),
        }
    )
    return report


def _item(rid: str) -> dict[str, Any]:
    return {"kind": "function_job", "remote_id": rid, "timeout_s": 86_400}


async def intake(
    session: aiohttp.ClientSession, serve: Serve, ids: list[str], p: Params
) -> dict[str, float]:
    """Single and batch intake against a service that is not polling (first read far away)."""
    singles, rest = ids[: p.singles], ids[p.singles :]
    url = f"{serve.url}/v1/trackings"
    queue = iter(singles)
    accepted = 0

    async def single_client() -> None:
        nonlocal accepted
        for rid in queue:
            async with session.post(url, json=_item(rid)) as resp:
                if resp.status in (200, 201):
                    accepted += 1
                await resp.read()

    t0 = time.monotonic()
    await asyncio.gather(*(single_client() for _ in range(p.single_clients)))
    single_rate = accepted / (time.monotonic() - t0)

    batches = iter([rest[i : i + p.batch_size] for i in range(0, len(rest), p.batch_size)])
    accepted_batch = 0

    async def batch_client() -> None:
        nonlocal accepted_batch
        for chunk in batches:
            body = orjson.dumps({"items": [_item(r) for r in chunk]})
            headers = {"Content-Type": "application/json"}
            async with session.post(f"{url}/batch", data=body, headers=headers) as resp:
                answer = orjson.loads(await resp.read())
            accepted_batch += sum(1 for i in answer["items"] if i["status"] in (200, 201))

    t0 = time.monotonic()
    await asyncio.gather(*(batch_client() for _ in range(p.batch_clients)))
    batch_rate = accepted_batch / (time.monotonic() - t0)
    return {
        "intake_single_per_s": single_rate,
        "intake_batch_per_s": batch_rate,
        "intake_accepted": accepted + accepted_batch,
    }


async def measure_polls(
    session: aiohttp.ClientSession, serve: Serve, sim: Simulator, window: float
) -> dict[str, Any]:
    before = await scrape(session, serve.url)
    mark, sim_cpu = CpuMark.take(serve.pid), SimCpu(sim)
    await asyncio.sleep(window)
    after = await scrape(session, serve.url)
    cpu, wall = mark.since()
    polls = after["polls"] - before["polls"]
    return {
        "polls_per_s": polls / wall,
        "cpu_ms_per_poll": 1000 * cpu / max(1.0, polls),
        "cpu_share": cpu / wall,
        "simulator_cpu_share": sim_cpu.share(),
        "lateness_p50_s": histogram_quantile(0.5, before["lateness"], after["lateness"]),
        "lateness_p99_s": histogram_quantile(0.99, before["lateness"], after["lateness"]),
        "non_ok": polls - (after["polls_ok"] - before["polls_ok"]),
    }


async def caught_up(
    session: aiohttp.ClientSession, serve: Serve, rate: float, limit_s: float = 120.0
) -> float:
    """Seconds from ready until the resumed service reads no faster than its schedule
    asks (a second under 1.2 x ``rate``): the reads that fell due while it loaded its
    trackings are done. That catch-up is the restart's, not steady-state lateness."""
    started = mark = time.monotonic()
    before = (await scrape(session, serve.url))["polls"]
    while mark - started < limit_s:
        await asyncio.sleep(1.0)
        now, at = (await scrape(session, serve.url))["polls"], time.monotonic()
        if now - before <= 1.2 * rate * (at - mark):
            break
        before, mark = now, at
    return time.monotonic() - started


async def first_reads_done(session: aiohttp.ClientSession, serve: Serve) -> float:
    """Seconds from process start until every resumed tracking has been read once
    (the service counts them; the first reads may begin before it is ready)."""
    async with asyncio.timeout(600):
        while (await scrape(session, serve.url))["resume_pending"] > 0:
            await asyncio.sleep(0.25)
    return time.time() - serve.started_at


async def writes_done(session: aiohttp.ClientSession, serve: Serve) -> float:
    """Seconds from process start until the engine's writes have all reached the store."""
    async with asyncio.timeout(600):
        while (await scrape(session, serve.url))["write_backlog"] > 0:
            await asyncio.sleep(0.25)
    return time.time() - serve.started_at


async def restart(
    session: aiohttp.ClientSession, serve: Serve, rate: float, new_id: str
) -> dict[str, float]:
    """From process start to every resumed tracking read once, the peak request rate
    meanwhile, and how soon a tracking posted halfway through is first read."""
    serve.spawn()
    t0 = serve.started_at
    await serve.ready(session)
    ready_s = time.time() - t0
    samples: list[tuple[float, float]] = []
    done_at = None
    newcomer: asyncio.Task[float] | None = None
    first_pending = None
    try:
        async with asyncio.timeout(600):
            while True:
                now = await scrape(session, serve.url)
                samples.append((time.monotonic(), now["polls"]))
                # The service counts the resumed trackings it has not read yet.
                pending = now["resume_pending"]
                if pending == 0:
                    done_at = time.time()
                    break
                first_pending = first_pending or pending
                if newcomer is None and pending <= first_pending / 2:
                    newcomer = asyncio.create_task(first_read_of_new(session, serve, new_id))
                # Finer near the end, where the spacing is the figure's error; coarser
                # before, since every scrape costs the service loop time. pending / rate
                # is the least time left (no read beats the limit).
                left_s = pending / rate
                await asyncio.sleep(0.05 if left_s < 0.5 else min(0.5, left_s - 0.45))
        if newcomer is None:  # caught up before the first scrape: posted after it
            newcomer = asyncio.create_task(first_read_of_new(session, serve, new_id))
        new_first_read_s = await newcomer
    finally:
        if newcomer is not None and not newcomer.done():
            newcomer.cancel()
    samples.append((time.monotonic(), (await scrape(session, serve.url))["polls"]))
    peak = 0.0
    for i, (t, n) in enumerate(samples):
        # The busiest window of at least one second between two samples.
        for t2, n2 in samples[i + 1 :]:
            if t2 - t >= 1.0:
                peak = max(peak, (n2 - n) / (t2 - t))
                break
    if peak == 0.0 and len(samples) > 1:
        (ta, na), (tb, nb) = samples[0], samples[-1]
        peak = (nb - na) / max(tb - ta, 1e-3)
    return {
        "restart_to_ready_s": ready_s,
        "restart_to_polling_s": done_at - t0,
        "restart_peak_polls_per_s": peak,
        "restart_rate_limit": rate,
        "restart_new_first_read_s": new_first_read_s,
    }


async def first_read_of_new(session: aiohttp.ClientSession, serve: Serve, rid: str) -> float:
    """Post a tracking of ``rid``; seconds from its creation to its first read (the
    service's own timestamps)."""
    async with session.post(f"{serve.url}/v1/trackings", json=_item(rid)) as resp:
        assert resp.status == 201, await resp.text()
        tracking_id = (await resp.json())["tracking_id"]
    async with asyncio.timeout(120):
        while True:
            async with session.get(f"{serve.url}/v1/trackings/{tracking_id}") as resp:
                t = await resp.json()
            if t["polls"] >= 1:
                return parse_iso(t["last_polled_at"]) - parse_iso(t["created_at"])
            await asyncio.sleep(0.02)


def polling(
    initial: float, maximum: float, multiplier: float = 2.0, jitter: float = 0.2
) -> dict[str, Any]:
    return {
        "initial_delay_s": initial,
        "max_delay_s": maximum,
        "multiplier": multiplier,
        "jitter": jitter,
    }


def new_serve(
    workdir: Path,
    name: str,
    sim: Simulator,
    db: Path,
    pol: dict[str, Any],
    p: Params,
    rate: float,
    sink: str | None = None,
) -> Serve:
    port = free_port()
    cfg = serve_config(
        workdir / f"{name}.toml", port=port, db=db, sim_url=sim.url, polling=pol,
        max_in_flight=p.concurrency, rate=rate, sink_url=sink,
    )  # fmt: skip
    return Serve(cfg, port, workdir / f"{name}.log")


async def throughput(
    session: aiohttp.ClientSession, sim: Simulator, ids: list[str], p: Params, workdir: Path
) -> dict[str, Any]:
    """Intake, saturation taking turns with the baseline (then SIGKILL), restart, half
    saturation: one database, four service processes."""
    report: dict[str, Any] = {}
    db = workdir / "orchestrator.db"
    serve = new_serve(workdir, "intake", sim, db, polling(3600, 3600), p, 1e6)
    await serve.start(session)
    await asyncio.sleep(0.5)
    rss_empty = rss_bytes(serve.pid)
    report.update(await intake(session, serve, ids, p))
    report["intake_exit_code"] = serve.terminate()

    serve = new_serve(workdir, "saturation", sim, db, polling(0.02, 0.02, 1.0, 0.0), p, 1e6)
    await serve.start(session)
    # With every tracking due at once the loop is saturated while the service
    # loads its trackings: how long it then takes to become ready is reported.
    report["saturation_ready_s"] = time.time() - serve.started_at
    # Steady state: each tracking's first read (which stores its first status
    # body) is a one-off, measured by the restart phase; saturation is what
    # the service sustains afterwards, as the baseline's reads are.
    report["saturation_first_reads_s"] = await first_reads_done(session, serve)
    # ... and the first bodies those reads stored are written too: a writer still
    # catching up would be counted against the saturated reads.
    report["saturation_writes_done_s"] = await writes_done(session, serve)
    await asyncio.sleep(p.warmup_s)
    report.update(await side_by_side(session, serve, sim, ids, p, workdir))
    serve.kill()  # SIGKILL: the restart below resumes from whatever was committed

    restart_polling = polling(1.0, 30.0)
    serve = new_serve(workdir, "restart", sim, db, restart_polling, p, p.restart_rate)
    new_id = (await bulk_jobs(session, sim.url, 1))[0]
    report.update(await restart(session, serve, p.restart_rate, new_id))
    report["restart_initial_delay_s"] = restart_polling["initial_delay_s"]
    report["restart_exit_code"] = serve.terminate()

    half_rate = report["orchestrator_polls_per_s"] / 2
    interval = len(ids) / half_rate
    serve = new_serve(workdir, "half", sim, db, polling(interval, interval, 1.0, 0.2), p, 1e6)
    await serve.start(session)
    report["half_caught_up_s"] = await caught_up(session, serve, half_rate)
    await asyncio.sleep(p.warmup_s)
    half = await measure_polls(session, serve, sim, p.half_window_s)
    rss = rss_bytes(serve.pid)
    report.update(
        {
            "half_target_polls_per_s": half_rate,
            "half_interval_s": interval,
            "half_polls_per_s": half["polls_per_s"],
            "half_cpu_ms_per_poll": half["cpu_ms_per_poll"],
            "lateness_p50_s": half["lateness_p50_s"],
            "lateness_p99_s": half["lateness_p99_s"],
            "rss_empty_bytes": rss_empty,
            "rss_active_bytes": rss,
            "rss_bytes_per_tracking": (rss - rss_empty) / len(ids),
        }
    )
    report["half_exit_code"] = serve.terminate()
    return report
