"""The application key under which the simulator keeps its state."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from orchestrator.simulator.state import SimState

STATE: web.AppKey[SimState] = web.AppKey("sim_state", SimState)
# Where the state is kept across restarts (None: in memory only).
STATE_PATH: web.AppKey[Path | None] = web.AppKey("sim_state_path")
# The id a request created (enqueue, submit, script), for the request log.
SIM_ID: web.RequestKey[str] = web.RequestKey("sim_id", str)
