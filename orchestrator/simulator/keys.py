"""The application key under which the simulator keeps its state."""

from __future__ import annotations

from aiohttp import web

from orchestrator.simulator.state import SimState

STATE: web.AppKey[SimState] = web.AppKey("sim_state", SimState)
