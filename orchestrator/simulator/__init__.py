"""A simulated Moltaro workspace (``orchestrator simulate``), for tests, the demo and the benchmark.

Public surface::

    create_app(profile="default", seed=None) -> aiohttp.web.Application
    await start_simulator(host="127.0.0.1", port=0, profile="default", seed=None)
        -> RunningSimulator   (.url, .port, .state, await .close(); async context manager)
    run_simulator(listen="127.0.0.1:5080", profile="default", seed=None)   # blocks
    PROFILES: dict[str, Profile]

Wire shapes and the ``/_sim/`` control API are those of ``docs/moltaro-wire.md``;
``docs/simulator.md`` describes the rest.
"""

from __future__ import annotations

from orchestrator.simulator.app import create_app
from orchestrator.simulator.profiles import Profile, builtin_profiles
from orchestrator.simulator.server import RunningSimulator, run_simulator, start_simulator

# Frozen descriptions of behaviour, not resources: safe to build at import.
PROFILES: dict[str, Profile] = builtin_profiles()

__all__ = [
    "PROFILES",
    "Profile",
    "RunningSimulator",
    "create_app",
    "run_simulator",
    "start_simulator",
]
