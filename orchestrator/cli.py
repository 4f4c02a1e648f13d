"""The ``orchestrator`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from orchestrator.config import load_settings, resolve_config_path, split_listen
from orchestrator.errors import ConfigError, StoreLocked

log = logging.getLogger("orchestrator.cli")


def run_async(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run on uvloop where it is installed: it roughly halves the CPU per poll."""
    factory = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


def _serve(args: argparse.Namespace) -> int:
    from orchestrator.logs import configure_logging
    from orchestrator.service import Service

    settings = load_settings(resolve_config_path(args.config))
    configure_logging(settings.logging.format, settings.logging.level)
    service = Service(settings)

    async def main() -> int:
        if not args.with_simulator:
            return await service.run()
        from orchestrator.simulator import start_simulator

        default = settings.workspace("default") or settings.workspaces[0]
        host_port = default.base_url.split("://", 1)[1]
        host, port = split_listen(host_port)
        sim = await start_simulator(host=host, port=port, profile=args.profile)
        try:
            return await service.run()
        finally:
            await sim.close()

    return run_async(main)


def _simulate(args: argparse.Namespace) -> int:
    from orchestrator.simulator import run_simulator

    run_simulator(args.listen, profile=args.profile, seed=args.seed)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator",
        description="Polling orchestrator for Moltaro's asynchronous jobs and builds.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the service")
    serve.add_argument(
        "--config", help="TOML file (else $ORCH_CONFIG, else config/orchestrator.toml)"
    )
    serve.add_argument(
        "--with-simulator",
        action="store_true",
        help="also start the bundled simulator at the default workspace's base URL",
    )
    serve.add_argument("--profile", default="default", help="simulator profile (--with-simulator)")
    serve.set_defaults(func=_serve)

    sim = sub.add_parser("simulate", help="run the bundled Moltaro workspace simulator")
    sim.add_argument("--listen", default="127.0.0.1:5080", help="HOST:PORT")
    sim.add_argument("--profile", default="default")
    sim.add_argument("--seed", type=int, default=None)
    sim.set_defaults(func=_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except ConfigError as exc:
        print(f"orchestrator: configuration error: {exc}", file=sys.stderr)
        return 2
    except StoreLocked as exc:
        print(f"orchestrator: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    return result
