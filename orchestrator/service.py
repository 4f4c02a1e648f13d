"""The composition root of ``orchestrator serve``: build, run, drain.

Start-up: open the store (migrations, lock), listen (liveness, metrics and
intake answer from then on; readiness says "loading"), read each workspace's
enums, load every active tracking, then poll and be ready. Every background task is named and
supervised: one that dies is logged, takes the service to not-ready and stops
it with exit code 1. Shutdown has three phases: stop intake and claiming; let
in-flight reads and deliveries finish within the grace period; cancel what is
left and flush the store. Terminal writes are shielded from cancellation.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from aiohttp import web

from orchestrator import tracing
from orchestrator.api.app import create_app
from orchestrator.clock import SystemClock
from orchestrator.config import Settings, api_tokens, split_listen
from orchestrator.engine.cancel import HeldElsewhere
from orchestrator.engine.engine import Engine, LoadProgress
from orchestrator.engine.replica import Replica
from orchestrator.errors import ConfigError, ListenError
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.events.delivery import DeliveryService
from orchestrator.events.pruner import run_pruner
from orchestrator.events.signing import signing_keys
from orchestrator.group_deadlines import run_group_deadlines
from orchestrator.logs import register_secret
from orchestrator.looplag import LoopLagMonitor
from orchestrator.memlimit import memory_limit
from orchestrator.metrics import Metrics
from orchestrator.runtime import Runtime
from orchestrator.startup_summary import startup_summary
from orchestrator.store.base import Store
from orchestrator.store.sqlite import SqliteStore
from orchestrator.tracker import Tracker
from orchestrator.workspace.client import WorkspaceClient, workspace_client
from orchestrator.workspace.enums import refresh_enums

if TYPE_CHECKING:
    from orchestrator.store.pg_connections import Listener

log = logging.getLogger("orchestrator.service")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_auth_rule(settings: Settings, tokens: frozenset[str]) -> None:
    host, _ = split_listen(settings.server.listen)
    if not tokens and not settings.server.allow_unauthenticated and not is_loopback(host):
        raise ConfigError(
            f"server.api_tokens_env: no API token in ${settings.server.api_tokens_env} and "
            f"server.listen {settings.server.listen} is not loopback; set a token or "
            "server.allow_unauthenticated = true"
        )


def _register_secrets(settings: Settings, tokens: frozenset[str]) -> None:
    names = [w.token_env for w in settings.workspaces]
    names += [s.secret_env for s in settings.events.sinks if s.secret_env]
    names += [settings.events.callback_secret_env, settings.store.password_env]
    for secret in [*tokens, *map(os.environ.get, names)]:
        register_secret(secret)


def replica_id(settings: Settings) -> str:
    return settings.server.replica_id or f"{socket.gethostname()}:{os.getpid()}"


def build_store(settings: Settings) -> Store:
    """PostgreSQL when ``store.url`` is set (several replicas), else the SQLite file."""
    s = settings.store
    if s.url:
        from orchestrator.store.postgres import PostgresStore  # asyncpg: only when used

        return PostgresStore(
            s.url,
            replica_id=replica_id(settings),
            password=os.environ.get(s.password_env) or None,
            pool_size=s.pool_size,
            lease_timeout_s=s.lease_timeout_s,
        )
    return SqliteStore(
        s.path,
        commit_interval_s=s.commit_interval_s,
        max_batch=s.max_batch,
        synchronous=s.synchronous,
    )


async def _resume(engine: Engine, store: Store, progress: LoadProgress) -> int:
    """Resume without the cyclic collector, then freeze what was resumed.

    The resumed entries are allocated in one go and live long: collecting
    meanwhile slows the start, and every later full collection would walk them
    again and stall the loop. Entries are freed by reference counting when they
    finish; freezing only keeps the collector from re-examining them.
    """
    # 100,000 entries: resume CPU 1.1 s, not 1.5 s; a full collection after it 0, not 0.09 s.
    gc.disable()
    try:
        return await engine.resume(store, progress=progress)
    finally:
        gc.enable()
        gc.freeze()


def _store_listener(
    store: Store, deliveries: DeliveryService, replica: Replica, metrics: Metrics
) -> Listener | None:
    """The LISTEN connection of a PostgreSQL store (asyncpg is imported for it alone)."""
    if not store.shares_work:
        return None
    from orchestrator.store.pg_connections import Listener
    from orchestrator.store.postgres import PostgresStore

    if not isinstance(store, PostgresStore):
        return None

    def notified(payload: str) -> None:
        if payload == "sinks":
            deliveries.sinks_changed()
        else:
            replica.notified(payload)

    return Listener(store.connect_kwargs, notified, metrics.store_listener_up.set)


class Service:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tokens = api_tokens(settings)
        check_auth_rule(settings, self.tokens)
        _register_secrets(settings, self.tokens)
        # Checked before anything starts: a missing secret is exit 2, not unsigned.
        self.signing_keys = signing_keys(settings.events)
        self.stop_requested = asyncio.Event()
        self.failed = False
        self.port: int | None = None
        # Set by `serve --with-simulator`: shown in the start-up line.
        self.simulator_url: str | None = None

    def request_stop(self) -> None:
        self.stop_requested.set()

    async def run(self, on_ready: Callable[[Service], Awaitable[None]] | None = None) -> int:
        s = self.settings
        clock = SystemClock()
        store = build_store(s)
        await store.open()
        metrics = Metrics()
        metrics.memory_limit_bytes.set(memory_limit() or 0)
        metrics.preinitialise(
            [w.name for w in s.workspaces], [sink.name for sink in s.events.sinks] + ["callback"]
        )
        bus = EventBus()
        tracing.start()  # OpenTelemetry, if its environment variables ask for it
        runner: web.AppRunner | None = None
        engine_task: asyncio.Task[None] | None = None
        clients: dict[str, WorkspaceClient] = {}
        own_signals = False
        loop = asyncio.get_running_loop()
        try:
            for w in s.workspaces:
                token = os.environ.get(w.token_env) or None
                clients[w.name] = workspace_client(w, token, clock, replica_id(s))
            engine = Engine(s, store, clock, metrics, bus, EventFactory(s.events), clients)
            deliveries = DeliveryService(
                store, s.events, metrics, clock, bus, keys=self.signing_keys
            )
            await deliveries.load_state()
            lag = LoopLagMonitor(metrics)
            replica = Replica(
                replica_id=replica_id(s),
                store=store,
                engine=engine,
                settings=s,
                metrics=metrics,
                bus=bus,
                lag=lag,
            )
            elsewhere = None
            if store.shares_work:
                elsewhere = HeldElsewhere(clients, engine.finisher, engine.poll_metrics)
            progress = LoadProgress()
            metrics.resume_loaded.set_function(lambda: progress.loaded)
            metrics.resume_expected.set_function(lambda: progress.total)
            runtime = Runtime(
                settings=s,
                store=store,
                clock=clock,
                metrics=metrics,
                bus=bus,
                api_tokens=self.tokens,
                tracker=Tracker(engine, store, metrics, elsewhere, lambda: not progress.done),
                deliveries=deliveries,
                replica=replica,
                loading=progress,
            )
            # Listen first: liveness, metrics and intake answer while the active
            # trackings load; readiness says how far the load is.
            runner = await self._listen(runtime)
            # Signal handlers can only be set from the main thread; an embedding
            # application running us elsewhere calls request_stop() instead.
            own_signals = threading.current_thread() is threading.main_thread()
            if own_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(sig, self.stop_requested.set)
            # Every active tracking is loaded before the pollers start (intake made
            # meanwhile is adopted at once). A shared store's work comes through the
            # replica's claims instead. A stop meanwhile ends the start-up: nothing
            # was polled, so nothing is left to write.
            started = await self._until_stop(refresh_enums(clients, metrics)) and (
                store.shares_work or await self._until_stop(_resume(engine, store, progress))
            )
            if started:
                progress.done = True
                engine_task = asyncio.create_task(engine.run(), name="engine")
                log.info("resumed active trackings", extra={"fields": {"count": progress.loaded}})
                metrics.ready.set(1)
                await self._supervise(runtime, engine, engine_task, deliveries, lag, on_ready)
            else:
                log.info("stopped while starting", extra={"fields": {"loaded": progress.loaded}})
        finally:
            if own_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            if engine_task is not None and not engine_task.done():  # start-up failed
                engine_task.cancel()
                await asyncio.wait([engine_task])
            if runner is not None:
                await runner.cleanup()
            for client in clients.values():
                await client.close()
            await store.close()
            await asyncio.to_thread(tracing.stop)  # the spans still buffered go out
        log.info("stopped", extra={"fields": {"failed": self.failed}})
        return 1 if self.failed else 0

    async def _listen(self, runtime: Runtime) -> web.AppRunner:
        s = self.settings
        app = create_app(runtime)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        host, port = split_listen(s.server.listen)
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ListenError(
                f"server.listen: cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        addresses = runner.addresses  # the port bound, when server.listen asks for 0
        self.port = addresses[0][1] if addresses else port
        api_url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        message, fields = startup_summary(s, api_url, self.signing_keys, self.simulator_url)
        log.info("%s", message, extra={"fields": fields})
        return runner

    async def _until_stop(self, step: Awaitable[Any]) -> bool:
        """Run a start-up step unless a stop comes first (then it is cancelled): False."""
        task = asyncio.ensure_future(step)
        stop = asyncio.ensure_future(self.stop_requested.wait())
        try:
            await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait([task])
        if task.cancelled():
            return False
        task.result()  # a failed step fails the start-up
        return True

    async def _supervise(
        self,
        runtime: Runtime,
        engine: Engine,
        engine_task: asyncio.Task[None],
        deliveries: DeliveryService,
        lag: LoopLagMonitor,
        on_ready: Callable[[Service], Awaitable[None]] | None,
    ) -> None:
        s = self.settings
        side_stop = asyncio.Event()
        tasks: dict[str, asyncio.Task[Any]] = {}

        def spawn(name: str, coro: Coroutine[Any, Any, Any]) -> None:
            watch(name, asyncio.create_task(coro, name=name))

        def watch(name: str, task: asyncio.Task[Any]) -> None:
            tasks[name] = task

            def done(t: asyncio.Task[Any]) -> None:
                if t.cancelled() or self.stop_requested.is_set():
                    return
                exc = t.exception()
                # A background task must only end when asked to; ending early
                # (with or without an error) is a failure of the service.
                log.error(
                    "background task ended unexpectedly",
                    exc_info=exc,
                    extra={"fields": {"task": name}},
                )
                runtime.failed_tasks.append(name)
                self.failed = True
                self.stop_requested.set()

            task.add_done_callback(done)

        watch("engine", engine_task)
        spawn("deliveries", deliveries.run())
        spawn("pruner", run_pruner(runtime.store, s.events, runtime.clock, side_stop))
        spawn("loop-lag", lag.run(side_stop))
        assert runtime.tracker is not None
        spawn(
            "group-deadlines",
            run_group_deadlines(runtime.tracker, runtime.bus.publish, side_stop, runtime.metrics),
        )
        replica = runtime.replica
        assert replica is not None
        spawn("replica", replica.run(side_stop))
        listener = _store_listener(runtime.store, deliveries, replica, runtime.metrics)
        if listener is not None:
            spawn("store-listener", listener.run(side_stop))

        if on_ready is not None:
            await on_ready(self)
        await self.stop_requested.wait()

        # Phase 1: stop intake (503) and claiming. What is held now is kept to the end:
        # no full collection walks a million entries while draining or at exit.
        gc.freeze()
        runtime.draining = True
        runtime.metrics.ready.set(0)
        runtime.bus.publish()  # wakes SSE streams so that they end now
        log.info("draining", extra={"fields": {"grace_s": s.server.shutdown_grace_s}})
        deliveries.stop(s.server.shutdown_grace_s)
        side_stop.set()
        # Phase 2: in-flight reads finish within the grace period; the engine
        # flushes poll results and waits for shielded terminal writes; then the
        # leases go back, so that other replicas take the work at once.
        await engine.stop(s.server.shutdown_grace_s)
        await replica.release_all()
        # Phase 3: anything still running after the hard deadline is cancelled.
        pending = [t for t in tasks.values() if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=s.server.shutdown_hard_s)
            for task in still:
                log.warning("cancelled at shutdown", extra={"fields": {"task": task.get_name()}})
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=1.0)
