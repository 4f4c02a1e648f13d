"""The simulator's state in a file, so that a restart keeps its jobs, builds and schedules.

Written after every request that may change it (and after a read that let a
schedule enqueue an occurrence), before the answer goes out: what a client was
told exists survives a SIGKILL. The file is a pickle of the simulator's own
objects: it is for the simulator of one machine, never for data from elsewhere.
The request log is not kept.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from orchestrator.simulator.reqlog import RequestLog
from orchestrator.simulator.state import SimState


def save(state: SimState, path: Path) -> None:
    log, state.log = state.log, RequestLog(state.log.enabled)
    try:
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        state.log = log
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: Path) -> SimState | None:
    """The saved state, or None when there is no file yet."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        state = pickle.loads(data)
    except Exception as exc:
        raise ValueError(f"{path}: not a simulator state file ({type(exc).__name__})") from None
    if not isinstance(state, SimState):
        raise ValueError(f"{path}: not a simulator state file")
    return state
