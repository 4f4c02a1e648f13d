"""`orchestrator explain` as a user runs it, against the simulator over loopback."""

from __future__ import annotations

import asyncio
import sys

from orchestrator.simulator import start_simulator


async def _explain(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "orchestrator",
        "explain",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_explain_rows_flags_and_unknown_key() -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=1)
    try:
        code, out, _ = await _explain("billing.sync-invoices", "--workspace-url", sim.url)
        assert code == 0
        assert "queued" in out and "track with kind: function_job" in out
        assert "callable" in out
        code, out, _ = await _explain("totals.recalculate", "--workspace-url", sim.url, "--json")
        assert code == 0
        assert "enqueue_publication_on_non_job_contract" in out
        code, _, err = await _explain("no.such.key", "--workspace-url", sim.url)
        assert code == 1 and "no function key" in err
    finally:
        await sim.close()
