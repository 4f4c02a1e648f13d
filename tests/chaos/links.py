"""Faults on the links of replicas that keep running: three replicas on one
PostgreSQL, each reaching the database, the workspace and the sink through
fault proxies of the tests' own (``tests/faultproxy.py``), while scripted jobs
arrive at a steady rate.

A scenario cuts, resets, slows or makes lossy some links for a while, then
heals them. Throughout, every replica's ``/readyz`` and ``/metrics`` are probed
twice a second; afterwards the run is checked against the simulator's scripted
truth (``tests/chaos/report.check``: lost, false and duplicate terminals, at
the feed and at the sink), the simulator's request log (reads of one job by two
replicas within 0.5 s, the fleet's busiest second against the limit), and the
times the fault cost (readiness again, every job that ended before the heal
ended in the service, the longest wait of a job's terminal after its real end).

``run_link_scenario`` is what ``tests/chaos/test_link_scenarios.py`` (CI-sized)
and ``scripts/faults.py`` (longer, by hand) call. Packet loss is made with
iptables on this machine's loopback, for the proxies' ports only, in a chain of
the run's own that it removes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import time
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp

from orchestrator.clock import parse_iso
from orchestrator.simulator import RunningSimulator, start_simulator
from tests.chaos.harness import (
    ENDS,
    EXPECTED,
    KINDS,
    Client,
    Plan,
    Secrets,
    Sink,
    metric_sum,
    script,
)
from tests.chaos.harness import write_config as base_config
from tests.chaos.replicas import overlapping_reads
from tests.chaos.report import ChaosReport, check
from tests.faultproxy import FaultProxy
from tests.serveproc import ServeProcess, free_port

PROBE_TIMEOUT_S = 1.0  # what an orchestrator's readiness probe would allow
Link = Literal["db", "workspace", "sink"]


def through(dsn: str, port: int) -> str:
    """``dsn`` pointed at a proxy on 127.0.0.1:``port``."""
    parts = urllib.parse.urlsplit(dsn)
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0] + "@" if len(netloc) == 2 else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@dataclass
class Replica:
    serve: ServeProcess
    proxy: FaultProxy  # its database link
    workspace: FaultProxy  # its link to the workspace
    sink: FaultProxy | None  # its link to the sink
    client: Client

    def link(self, name: Link) -> FaultProxy:
        proxy = {"db": self.proxy, "workspace": self.workspace, "sink": self.sink}[name]
        assert proxy is not None, f"replica has no {name} link"
        return proxy


@asynccontextmanager
async def replicas(
    tmp_path: Path,
    dsn: str,
    sim: RunningSimulator,
    session: aiohttp.ClientSession,
    n: int,
    lease_timeout_s: float = 3.0,
    rate: float | None = None,
    sink: Sink | None = None,
    secrets: Secrets | None = None,
) -> AsyncIterator[list[Replica]]:
    """``n`` replicas on ``dsn``, every link through a proxy; ``rate`` is the
    workspace's combined limit."""
    secrets = secrets or Secrets()
    target = urllib.parse.urlsplit(dsn)
    out: list[Replica] = []
    proxies: list[FaultProxy] = []

    async def proxy_to(host: str, port: int) -> FaultProxy:
        proxies.append(FaultProxy(host, port))
        await proxies[-1].start()
        return proxies[-1]

    try:
        for i in range(n):
            db = await proxy_to(target.hostname or "127.0.0.1", target.port or 5432)
            workspace = await proxy_to("127.0.0.1", sim.port)
            sink_link = None
            sink_url = None
            if sink is not None:
                hooks = urllib.parse.urlsplit(sink.url)
                sink_link = await proxy_to("127.0.0.1", hooks.port or 80)
                sink_url = f"http://127.0.0.1:{sink_link.port}/hooks"
            port = free_port()
            directory = tmp_path / f"r{i}"
            directory.mkdir()
            ws_url = f"http://127.0.0.1:{workspace.port}"
            cfg = base_config(
                directory, port=port, sim_url=ws_url, store_path=directory / "x.db",
                sink_url=sink_url,
            )  # fmt: skip
            if rate is not None:  # the last table of the file is the workspace's
                cfg.write_text(cfg.read_text() + f"max_requests_per_second = {rate}\n")
            env = {
                **secrets.env(),
                "ORCH_STORE__URL": through(dsn, db.port),
                "ORCH_STORE__LEASE_TIMEOUT_S": str(lease_timeout_s),
                "ORCH_SERVER__REPLICA_ID": f"r{i}",
            }
            serve = ServeProcess(cfg, port, directory / "serve.log", env)
            client = Client(session, serve.url, secrets.api_token)
            out.append(Replica(serve, db, workspace, sink_link, client))
            await serve.start(session, timeout=60)
        yield out
    finally:
        for r in out:
            r.serve.ensure_dead()
        for proxy in proxies:
            await proxy.close()


async def probe(session: aiohttp.ClientSession, url: str) -> tuple[float, int, str]:
    """How long the answer took, its status (0: none in time) and its body."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S + 0.5):
            async with session.get(url) as resp:
                return time.monotonic() - started, resp.status, await resp.text()
    except (TimeoutError, aiohttp.ClientError):
        return time.monotonic() - started, 0, ""


def loss_tools() -> str | None:
    """Why packet loss cannot be made here, or None when it can."""
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    if os.geteuid() != 0:
        return "making packet loss with iptables needs root"
    return None


@contextlib.contextmanager
def packet_loss(ports: list[int], probability: float) -> Iterator[None]:
    """``probability`` of the TCP packets to and from ``ports`` on loopback dropped,
    in both directions, by a chain of this process's own."""
    chain = f"orch-loss-{os.getpid()}"

    def ipt(*args: str, check: bool = True) -> None:
        subprocess.run(["iptables", "-w", *args], check=check, capture_output=True, timeout=30)

    ipt("-N", chain)
    try:
        ipt("-I", "INPUT", "-i", "lo", "-j", chain)
        for port in ports:
            for side in ("--dport", "--sport"):
                ipt("-A", chain, "-p", "tcp", side, str(port), "-m", "statistic",
                    "--mode", "random", "--probability", str(probability), "-j", "DROP")  # fmt: skip
        yield
    finally:
        ipt("-D", "INPUT", "-i", "lo", "-j", chain, check=False)
        ipt("-F", chain, check=False)
        ipt("-X", chain, check=False)


@dataclass(frozen=True)
class Scenario:
    name: str
    links: tuple[Link, ...]
    mode: Literal["hang", "reset", "delay", "loss"]
    everyone: bool = False  # every replica's links, else r0's only
    delay_s: float = 0.0
    loss: float = 0.0
    what: str = ""


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("db-hang", ("db",), "hang", what="r0's database link black-holed"),
        Scenario("db-reset", ("db",), "reset", what="r0's database link reset, and new ones"),
        Scenario("workspace-cut", ("workspace",), "loss", loss=1.0,
                 what="r0 cut from the workspace (every packet dropped)"),
        Scenario("db-slow-300ms", ("db",), "delay", everyone=True, delay_s=0.3,
                 what="300 ms added each way on every database link"),
        Scenario("db-slow-2s", ("db",), "delay", everyone=True, delay_s=2.0,
                 what="2 s added each way on every database link"),
        Scenario("loss-5pct", ("db", "workspace", "sink"), "loss", everyone=True, loss=0.05,
                 what="5% of packets dropped on every link of every replica"),
        Scenario("sink-cut", ("sink",), "hang", what="r0 cut from the sink"),
    )
}  # fmt: skip


@dataclass
class Sizes:
    before_s: float = 4.0
    fault_s: float = 12.0
    after_s: float = 4.0  # intake goes on this long after the heal
    rate: float = 4.0  # trackings a second
    limit: float = 40.0  # the workspace's combined request limit
    lease_timeout_s: float = 8.0
    settle_s: float = 150.0
    seed: int = 1


@dataclass
class Timeline:
    started: float = field(default_factory=time.monotonic)
    cut: float = 0.0
    healed: float = 0.0
    # (seconds from start, replica, seconds the answer took, status: 0 none)
    ready: list[tuple[float, int, float, int]] = field(default_factory=list)
    # (seconds from start when the scrape answered, replica, store_up, leases)
    gauges: list[tuple[float, int, float | None, float | None]] = field(default_factory=list)

    def at(self) -> float:
        return time.monotonic() - self.started


async def _watch(fleet: list[Replica], session: aiohttp.ClientSession, tl: Timeline) -> None:
    while True:
        for i, r in enumerate(fleet):
            at = tl.at()
            took, status, _ = await probe(session, r.serve.url + "/readyz")
            tl.ready.append((at, i, took, status))
            _, mstatus, text = await probe(session, r.serve.url + "/metrics")
            # Stamped when answered: a scrape sent just before the heal may show the
            # state after it.
            answered = tl.at()
            if mstatus == 200:
                up = metric_sum(text, "orchestrator_store_up")
                leases = metric_sum(text, "orchestrator_replica_leases")
                tl.gauges.append((answered, i, up, leases))
            else:
                tl.gauges.append((answered, i, None, None))
        await asyncio.sleep(0.5)


class Intake:
    """Scripted jobs at a steady rate, each second's batch to the next replica; a
    batch refused (503) or unanswered goes to the next one after a pause."""

    def __init__(self, sim: RunningSimulator, fleet: list[Replica], sizes: Sizes) -> None:
        self.sim, self.fleet, self.sizes = sim, fleet, sizes
        self.plan = Plan()
        self.ends: dict[str, float] = {}  # truth key -> the job's real end (wall clock)
        self.acknowledged: set[str] = set()
        self.answers: Counter[str] = Counter()
        self.rng = random.Random(sizes.seed)
        self._turn = 0

    async def run(self, session: aiohttp.ClientSession, until: float) -> None:
        owed, pending = 0.0, []
        while time.monotonic() < until:
            owed += self.sizes.rate
            n, owed = int(owed), owed - int(owed)
            if n:
                wave = await self._script(session, n)
                pending.append(asyncio.create_task(self._post(wave)))
            await asyncio.sleep(1.0)
        await asyncio.gather(*pending)

    async def _script(self, session: aiohttp.ClientSession, n: int) -> Plan:
        wave = Plan()
        for i in range(n):
            kind = KINDS[i % len(KINDS)]
            end = ENDS[kind][self.rng.randrange(3)]
            after = self.rng.uniform(1.0, 6.0)
            rid = await script(session, self.sim.url, kind, end, after)
            wave.add("default", kind, rid, EXPECTED[end], timeout_s=600)
            self.ends[f"default/{kind}/{rid}"] = time.time() + after
        self.plan.truth.update(wave.truth)
        self.plan.items += wave.items
        return wave

    async def _post(self, wave: Plan) -> None:
        for _ in range(60):
            r = self.fleet[self._turn % len(self.fleet)]
            self._turn += 1
            try:
                async with asyncio.timeout(10):
                    status, body = await r.client.post("/v1/trackings/batch", {"items": wave.items})
            except (aiohttp.ClientError, OSError, TimeoutError):
                self.answers["no answer in 10 s"] += 1
                await asyncio.sleep(0.5)
                continue
            self.answers[str(status)] += 1
            if status == 200 and all(item["status"] in (200, 201) for item in body["items"]):
                for item in body["items"]:
                    self.acknowledged.add(item["tracking"]["tracking_id"])
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"a batch was never taken: {self.answers}")


def _apply(fleet: list[Replica], sc: Scenario) -> Callable[[], None]:
    """Starts the fault (but loss, made by the caller); returns what heals it."""
    targets = [r.link(name) for r in (fleet if sc.everyone else fleet[:1]) for name in sc.links]
    if sc.mode != "loss":
        for proxy in targets:
            proxy.set(sc.mode, sc.delay_s)

    def heal() -> None:
        for proxy in targets:
            proxy.set("pass")

    return heal


def busiest_second(sim: RunningSimulator) -> tuple[int, float, dict[str, int]]:
    """The most workspace requests of the fleet in any one-second window: how many,
    when the window ended (the simulator's clock), and how many were each replica's."""
    rows = sorted(
        (r["t"], r["replica"] or "")
        for r in sim.state.log.requests(None)
        if r["route"] != "control"
    )
    most, end, first = 0, 0.0, 0
    for last, (t, _) in enumerate(rows):
        while rows[first][0] <= t - 1.0:
            first += 1
        if last - first + 1 > most:
            most, end = last - first + 1, t
    return most, end, dict(Counter(who for t, who in rows if end - 1.0 < t <= end))


def status_reads_between(sim: RunningSimulator, t0: float, t1: float) -> int:
    """Status reads stamped in [t0, t1) by the simulator's own clock (time.time)."""
    return sum(
        1
        for r in sim.state.log.requests(None)
        if r["route"] in ("job_status", "build_status") and t0 <= r["t"] < t1
    )


async def run_link_scenario(
    workdir: Path,
    dsn: str,
    sc: Scenario,
    sizes: Sizes | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> tuple[ChaosReport, dict[str, Any]]:
    sizes = sizes or Sizes()
    secrets = Secrets()
    sink = Sink(secrets.sink_secret)
    await sink.start()
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with (
            await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=sizes.seed) as sim,
            aiohttp.ClientSession(timeout=timeout) as session,
            replicas(workdir, dsn, sim, session, 3, lease_timeout_s=sizes.lease_timeout_s,
                     rate=sizes.limit, sink=sink, secrets=secrets) as fleet,
        ):  # fmt: skip
            return await _run(sim, session, fleet, sink, sc, sizes, say)
    finally:
        await sink.close()


async def _run(
    sim: RunningSimulator,
    session: aiohttp.ClientSession,
    fleet: list[Replica],
    sink: Sink,
    sc: Scenario,
    sizes: Sizes,
    say: Callable[[str], None],
) -> tuple[ChaosReport, dict[str, Any]]:
    tl = Timeline()
    intake = Intake(sim, fleet, sizes)
    total_s = sizes.before_s + sizes.fault_s + sizes.after_s
    stream = asyncio.create_task(intake.run(session, tl.started + total_s))
    watch = asyncio.create_task(_watch(fleet, session, tl))
    try:
        await asyncio.sleep(sizes.before_s)
        say(f"{sc.name}: {sc.what} for {sizes.fault_s:g} s")
        sim_cut = time.time()
        polls_before = {
            i: metric_sum(await r.client.metrics(), "orchestrator_polls_total", result="timeout")
            for i, r in enumerate(fleet)
        }
        loss = contextlib.nullcontext()
        if sc.mode == "loss":
            ports = [
                r.link(n).port for r in (fleet if sc.everyone else fleet[:1]) for n in sc.links
            ]
            loss = packet_loss(ports, sc.loss)  # type: ignore[assignment]
        with loss:
            heal = _apply(fleet, sc)
            tl.cut = tl.at()
            await asyncio.sleep(sizes.fault_s)
            heal()
        tl.healed = tl.at()
        healed_wall = time.time()
        say(f"{sc.name}: healed; intake goes on for {sizes.after_s:g} s, then settling")
        await stream
        await _settle(fleet, sink, intake, sizes.settle_s)
        settled = tl.at()
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        if not stream.done():
            stream.cancel()
    first = fleet[0].client
    trackings = await first.trackings()
    events = await first.events()
    feeds_differ = 0
    for r in fleet[1:]:
        feeds_differ += int(await r.client.events() != events)
    metrics = [await r.client.metrics() for r in fleet]
    exits = [await asyncio.to_thread(r.serve.terminate) for r in fleet]
    report = check(ChaosReport(), intake.plan.truth, intake.acknowledged, trackings, events,
                   sink.terminal_ids(), sink.terminal_hits())  # fmt: skip
    handovers, close, examples = overlapping_reads(sim.state.log, intake.plan.truth)
    report.examples += examples
    report.sink_refusals = sink.refused
    report.bad_signatures = sink.bad_signatures

    in_fault = [s for s in tl.ready if tl.cut <= s[0] <= tl.healed]
    by_key = {f"{t['workspace']}/{t['kind']}/{t['remote_id']}": t for t in trackings}
    waits = [
        parse_iso(by_key[k]["terminal_at"]) - end
        for k, end in intake.ends.items()
        if k in by_key and by_key[k].get("terminal_at")
    ]
    ended_before_heal = [
        parse_iso(by_key[k]["terminal_at"])
        for k, end in intake.ends.items()
        if end < healed_wall and k in by_key and by_key[k].get("terminal_at")
    ]
    fault_gauges = [g for g in tl.gauges if tl.cut <= g[0] <= tl.healed]
    timeouts = [
        metric_sum(m, "orchestrator_polls_total", result="timeout") - polls_before[i]
        for i, m in enumerate(metrics)
    ]
    busiest = busiest_second(sim)
    reads_before = status_reads_between(sim, sim_cut - sizes.before_s + 1, sim_cut)
    reads_fault = status_reads_between(sim, sim_cut, healed_wall)
    figures = {
        "scenario": sc.name,
        "what": sc.what,
        "fault_s": sizes.fault_s,
        "trackings": len(intake.plan.truth),
        "lost": report.trackings_lost,
        "duplicate_terminals": report.two_terminal_ids_feed + report.two_terminal_ids_sink,
        "false_terminals": report.false_terminals,
        "close_reads": close,
        "handovers": handovers,
        "busiest_second": busiest[0],
        "busiest_second_after_heal_s": round(busiest[1] - healed_wall, 2),
        "busiest_second_by_replica": busiest[2],
        "limit": sizes.limit,
        "readiness_slowest_s": round(max(s[2] for s in tl.ready), 3),
        "readiness_unanswered": sum(1 for s in tl.ready if s[3] == 0),
        "readiness_in_fault": dict(Counter(f"r{s[1]}:{s[3]}" for s in in_fault)),
        "unready_run_in_fault": _unready_runs(in_fault),
        "metrics_unanswered": sum(1 for g in tl.gauges if g[2] is None),
        "store_up_in_fault": dict(Counter(f"r{g[1]}:{g[2]:g}" for g in fault_gauges if g[2] is not None)),
        "r0_leases_in_fault": [g[3] for g in fault_gauges if g[1] == 0 and g[3] is not None],
        "polls_timed_out": timeouts,
        "reads_per_s_before": round(reads_before / max(1.0, sizes.before_s - 1), 1),
        "reads_per_s_in_fault": round(reads_fault / sizes.fault_s, 1),
        "ready_again_s": _ready_again(tl),
        "caught_up_s": round(max(ended_before_heal, default=healed_wall) - healed_wall, 2),
        "wait_after_real_end_p50_s": round(statistics.median(waits), 2) if waits else None,
        "wait_after_real_end_max_s": round(max(waits), 2) if waits else None,
        "intake_answers": dict(intake.answers),
        "settled_after_heal_s": round(settled - tl.healed, 1),
        "feeds_differ": feeds_differ,
        "sink_redeliveries": report.sink_redeliveries,
        "exit_codes": exits,
    }  # fmt: skip
    return report, figures


def _unready_runs(samples: list[tuple[float, int, float, int]]) -> list[int]:
    """Per replica: the most probes running that were not answered 200."""
    out = [0, 0, 0]
    run = [0, 0, 0]
    for _, i, _, status in samples:
        run[i] = run[i] + 1 if status != 200 else 0
        out[i] = max(out[i], run[i])
    return out


def _ready_again(tl: Timeline) -> float | None:
    """From the heal until every replica's probes said 200 from then on (None: some
    replica was not ready at the end)."""
    worst = 0.0
    for i in range(3):
        after = [s for s in tl.ready if s[1] == i and s[0] >= tl.healed]
        bad = [k for k, s in enumerate(after) if s[3] != 200]
        if not bad:
            continue
        if bad[-1] == len(after) - 1:
            return None
        worst = max(worst, after[bad[-1] + 1][0] - tl.healed)
    return round(worst, 2)


async def _settle(fleet: list[Replica], sink: Sink, intake: Intake, timeout_s: float) -> None:
    """Until every tracking taken is terminal and its event reached the sink."""
    async with asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                if not await fleet[0].client.active_count():
                    break
            await asyncio.sleep(0.5)
        while len(sink.terminal_ids()) < len(intake.acknowledged):
            await asyncio.sleep(0.5)


HEADERS = (
    ("scenario", "scenario"),
    ("trackings", "trackings"),
    ("lost", "lost"),
    ("dup", "duplicate_terminals"),
    ("false", "false_terminals"),
    ("close reads", "close_reads"),
    ("busiest s / limit", None),
    ("readiness slowest s", "readiness_slowest_s"),
    ("unanswered", "readiness_unanswered"),
    ("reads/s before, in fault", None),
    ("ready again s", "ready_again_s"),
    ("caught up s", "caught_up_s"),
    ("max wait s", "wait_after_real_end_max_s"),
)


def table(rows: list[dict[str, Any]]) -> str:
    """One Markdown row per scenario."""
    out = ["| " + " | ".join(h for h, _ in HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for f in rows:
        cells = []
        for header, key in HEADERS:
            if header.startswith("busiest"):
                cells.append(f"{f['busiest_second']} / {f['limit']:g}")
            elif header.startswith("reads/s"):
                cells.append(f"{f['reads_per_s_before']}, {f['reads_per_s_in_fault']}")
            else:
                assert key is not None
                cells.append(str(f[key]))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
