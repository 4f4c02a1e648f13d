"""The ``orchestrator`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.aio import run_async
from orchestrator.client.commands import DEFAULT_SERVER, EXIT_USAGE
from orchestrator.client.http import FILTER_FIELDS
from orchestrator.config import load_settings, resolve_config_path, split_listen
from orchestrator.errors import ConfigError, ListenError, StoreError, StoreLocked
from orchestrator.vocabulary import Kind

if TYPE_CHECKING:
    from rich.console import Console

log = logging.getLogger("orchestrator.cli")


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
        host, port = split_listen(default.base_url.split("://", 1)[1])
        # Kept beside the store by default: a restart keeps the simulated work
        # that the resumed trackings follow.
        state = Path(args.simulator_state or settings.store.path + ".simulator")
        state.parent.mkdir(parents=True, exist_ok=True)
        try:
            sim = await start_simulator(
                host=host, port=port, profile=args.profile, state_path=state
            )
        except ValueError as exc:  # an unreadable state file
            raise ConfigError(f"--simulator-state: {exc}") from None
        except OSError as exc:
            raise ListenError(
                f"workspaces.{default.name}.base_url: the simulator cannot listen on "
                f"{host}:{port}: {exc.strerror or exc}"
            ) from None
        service.simulator_url = sim.url
        try:
            return await service.run()
        finally:
            await sim.close()

    return run_async(main)


def _simulate(args: argparse.Namespace) -> int:
    from orchestrator.simulator import run_simulator

    try:
        state = None if args.state is None else Path(args.state)
        run_simulator(args.listen, profile=args.profile, seed=args.seed, state_path=state)
    except ValueError as exc:  # --listen not HOST:PORT
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ListenError(
            f"--listen: cannot listen on {args.listen}: {exc.strerror or exc}"
        ) from None
    return 0


def _track(args: argparse.Namespace) -> int:
    from orchestrator.client.commands import track

    console = _console()
    return run_async(
        lambda: track(
            console,
            kind=args.kind,
            remote_id=args.remote_id,
            wait=args.wait,
            server=args.server,
            workspace=args.workspace,
            timeout_s=args.timeout_s,
            filters={name: getattr(args, name) for name in FILTER_FIELDS},
        )
    )


def _group(args: argparse.Namespace) -> int:
    from orchestrator.client.group_commands import group_command

    return run_async(
        lambda: group_command(
            _console(), action=args.action, name=args.group, server=args.server,
            timeout_s=args.timeout_s,
        )
    )  # fmt: skip


def _status(args: argparse.Namespace) -> int:
    from orchestrator.client.commands import status

    return run_async(lambda: status(_console(), server=args.server))


def _health(args: argparse.Namespace) -> int:
    from orchestrator.client.health import local_url, probe

    url = args.url or local_url(load_settings(resolve_config_path(args.config)), args.ready)
    trouble = probe(url, args.timeout_s)
    if trouble is not None:
        print(f"orchestrator: {trouble}", file=sys.stderr)
        return 1
    return 0


def _console() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    # Piped or captured: wide enough for the tables, not 80 columns.
    return console if console.is_terminal else Console(highlight=False, width=160)


def _demo(args: argparse.Namespace) -> int:
    from orchestrator.demo import run_demo

    return run_demo(count=args.count, seed=args.seed, live=not args.no_live)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator",
        description="Polling orchestrator for Moltaro's asynchronous jobs and builds.",
    )
    parser.add_argument("--version", action="version", version=f"orchestrator {_version()}")
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
    profiles = _simulator_profiles()
    serve.add_argument(
        "--profile",
        default="default",
        choices=profiles,
        help=f"simulator profile (--with-simulator): {', '.join(profiles)}",
    )
    serve.add_argument(
        "--simulator-state",
        metavar="PATH",
        help="the simulator's state file (--with-simulator; default: beside the store)",
    )
    serve.set_defaults(func=_serve)

    sim = sub.add_parser("simulate", help="run the bundled Moltaro workspace simulator")
    sim.add_argument("--listen", default="127.0.0.1:5080", help="HOST:PORT")
    sim.add_argument("--profile", default="default", choices=profiles, help=", ".join(profiles))
    sim.add_argument("--seed", type=int, default=None)
    sim.add_argument(
        "--state", metavar="PATH", help="keep the simulated work in this file across restarts"
    )
    sim.set_defaults(func=_simulate)

    demo = sub.add_parser(
        "demo", help="simulator, service and an event sink together, with live progress"
    )
    demo.add_argument("--count", type=_positive_int, default=300, help="trackings (default 300)")
    demo.add_argument("--seed", type=int, default=None, help="repeat a run's mix and timings")
    demo.add_argument(
        "--no-live", action="store_true", help="plain progress lines instead of the live display"
    )
    demo.set_defaults(func=_demo)

    server_help = (
        f"the service's URL (else $ORCH_SERVER, else {DEFAULT_SERVER}); token: $ORCH_API_TOKEN"
    )
    trk = sub.add_parser(
        "track",
        help="track one job or build on a running service",
        description="Exit codes with --wait: 0 succeeded, 1 failed, 2 cancelled, "
        "3 deadline_exceeded, 4 not_found, 5 abandoned, 10 usage or connection error.",
    )
    kinds = [kind.value for kind in Kind]  # plain strings: argparse shows their repr
    trk.add_argument("kind", choices=kinds, metavar="KIND", help=", ".join(kinds))
    trk.add_argument(
        "remote_id",
        metavar="REMOTE_ID",
        nargs="?",
        help="the id Moltaro returned (a ScheduleId for schedule); none for the kinds "
        "found by filter (trigger_work, action_work: give their --FIELD options)",
    )
    for name in FILTER_FIELDS:
        option = "--" + name.replace("_", "-")
        if name == "expect_jobs":
            trk.add_argument(option, type=_positive_int, help="matched jobs that end it (1)")
        else:
            trk.add_argument(option, metavar=name.upper(), help=f"the intake field {name}")
    trk.add_argument("--wait", action="store_true", help="show status changes until terminal")
    trk.add_argument("--server", help=server_help)
    trk.add_argument("--workspace", default="default")
    trk.add_argument("--timeout-s", type=float, default=None, help="the tracking's deadline")
    trk.set_defaults(func=_track)

    grp = sub.add_parser(
        "group",
        help="a group of trackings: show it, or wait (with a progress bar) until it has ended",
        description="Exit codes: 0 every member succeeded, 1 some did not, 3 the group's "
        "deadline came first, 4 not ended yet (show, or wait past --timeout-s), 10 usage, "
        "connection or API trouble.",
    )
    grp.add_argument("action", choices=("show", "wait"))
    grp.add_argument("group", help="the group's name")
    grp.add_argument("--server", help=server_help)
    grp.add_argument("--timeout-s", type=float, default=None, help="wait: give up after this")
    grp.set_defaults(func=_group)

    st = sub.add_parser("status", help="what a running service is tracking, as a table")
    st.add_argument("--server", help=server_help)
    st.set_defaults(func=_status)

    health = sub.add_parser(
        "health",
        help="exit 0 if the service on this machine is live (--ready: ready), else 1",
        description="A probe for HEALTHCHECK and exec probes: asks /healthz (or /readyz) "
        "at the service's own server.listen, on loopback when it listens on all addresses.",
    )
    health.add_argument("--ready", action="store_true", help="ask /readyz instead of /healthz")
    health.add_argument("--config", help="TOML file (else $ORCH_CONFIG, else the defaults)")
    health.add_argument("--url", help="ask this URL instead")
    health.add_argument("--timeout-s", type=float, default=2.0, help="seconds (2)")
    health.set_defaults(func=_health)

    from orchestrator.platform.cli import add_explain_command

    add_explain_command(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moltaro-orchestrator")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _simulator_profiles() -> list[str]:
    from orchestrator.simulator.profiles import builtin_profiles

    return sorted(builtin_profiles())


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# argparse exits 2 on bad arguments; for the client commands 2 means "cancelled".
_CLIENT_COMMANDS = ("track", "status", "group")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(words)
    except SystemExit as exc:
        if exc.code == 2 and any(w in _CLIENT_COMMANDS for w in words[:1]):
            return EXIT_USAGE
        raise
    try:
        result: int = args.func(args)
    except ConfigError as exc:
        what = "" if isinstance(exc, ListenError) else "configuration error: "
        print(f"orchestrator: {what}{exc}", file=sys.stderr)
        return 2
    except StoreError as exc:  # the store cannot be opened: locked, not writable, SQLite too old
        print(f"orchestrator: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, StoreLocked) else 2
    except KeyboardInterrupt:
        return 130
    return result
