"""``orchestrator track --wait`` exits with its outcome's code; ``status`` prints the tables."""

from __future__ import annotations

import asyncio
import sys

import aiohttp

from orchestrator.client import OrchestratorClient
from orchestrator.vocabulary import Kind
from tests.newcomer.conftest import Stack, clean_env, free_port

FOREVER = 3600


async def cli(*args: str, token: str | None, timeout_s: float = 60) -> tuple[int, str]:
    env = clean_env(**({"ORCH_API_TOKEN": token} if token else {}), COLUMNS="160")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def steps(*pairs: tuple[float, str], **last: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"after_s": t, "status": s} for t, s in pairs]
    out[-1].update(last)
    return out


async def test_track_wait_exits_with_the_outcome_code(stack: Stack) -> None:
    ids = {
        # Completed late enough that a CLI started on a loaded machine still sees
        # it Leased first (its status line is asserted below).
        "succeeded": await stack.script(
            "function_job", steps((0, "Queued"), (0.3, "Leased"), (10, "Completed"))
        ),
        "failed": await stack.script(
            "net_operation_build",
            steps(
                (0, "Queued"),
                (0.3, "Running"),
                (0.8, "Failed"),
                failure="storage_capacity_exhausted",
            ),
        ),
        "cancelled": await stack.script(
            "workspace_ui_build", steps((0, "Queued"), (0.6, "Cancelled"))
        ),
        "deadline_exceeded": await stack.script(
            "function_job", steps((0, "Queued"), (0.2, "Leased"), (FOREVER, "Completed"))
        ),
        "not_found": await stack.script("function_job", [{"after_s": 0, "not_found": True}]),
        "abandoned": await stack.script(
            "function_job", steps((0, "Queued"), (0.2, "Leased"), (FOREVER, "Completed"))
        ),
    }
    kinds = {"failed": "net_operation_build", "cancelled": "workspace_ui_build"}
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        # Tracked first here so that the test knows which tracking to abandon; the
        # CLI's own intake then answers 200 with the same tracking.
        to_abandon = await orch.track("function_job", ids["abandoned"])

        async def run(outcome: str) -> tuple[int, str]:
            extra = ["--timeout-s", "1.5"] if outcome == "deadline_exceeded" else []
            kind = kinds.get(outcome, "function_job")
            return await cli(
                "track", kind, ids[outcome], "--wait", "--server", stack.url, *extra,
                token=stack.token,
            )  # fmt: skip

        tasks = {o: asyncio.create_task(run(o)) for o in ids}
        async with asyncio.timeout(30):
            while (await orch.get(to_abandon.tracking_id)).polls < 2:
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # let the CLI reach its wait loop
        await orch.abandon(to_abandon.tracking_id)
        results = {o: await t for o, t in tasks.items()}

    codes = {o: code for o, (code, _) in results.items()}
    assert codes == {
        "succeeded": 0,
        "failed": 1,
        "cancelled": 2,
        "deadline_exceeded": 3,
        "not_found": 4,
        "abandoned": 5,
    }, results
    out = results["failed"][1]
    assert "trk_" in out and "ended as failed" in out
    assert "storage_capacity_exhausted" in out
    assert "-> Leased" in results["succeeded"][1]  # a status change shown as it happened
    # While a 404 is being confirmed, the wait says so rather than nothing.
    assert "answered 404: confirming" in results["not_found"][1]


async def test_track_accepts_every_kind_the_api_accepts(stack: Stack) -> None:
    body = {"ScheduleId": "sch-cli", "FunctionKey": "billing.sync-invoices", "Cron": "0 0 1 1 *"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{stack.sim_url}/_sim/schedules", json=body) as resp,
    ):
        assert resp.status == 201, await resp.text()
    code, out = await cli("track", "schedule", "sch-cli", "--server", stack.url, token=stack.token)
    assert code == 0, out
    assert "schedule sch-cli" in out and "trk_" in out
    code, out = await cli("track", "--help", token=None)
    assert all(kind.value in out for kind in Kind)


async def test_track_without_wait_prints_the_tracking(stack: Stack) -> None:
    rid = await stack.script("function_job", steps((0, "Queued"), (0.2, "Completed")))
    code, out = await cli("track", "function_job", rid, "--server", stack.url, token=stack.token)
    assert code == 0
    assert rid in out and "trk_" in out


async def test_usage_and_connection_errors_exit_10(stack: Stack) -> None:
    code, out = await cli("track", "no_such_kind", "J-1", token=stack.token)
    assert code == 10, out
    code, out = await cli("track", token=stack.token)
    assert code == 10, out
    code, out = await cli(
        "track", "function_job", "J-1", "--server", f"http://127.0.0.1:{free_port()}",
        token=stack.token,
    )  # fmt: skip
    assert code == 10 and "cannot reach" in out
    # Plain words for plain http: not aiohttp's "Cannot connect to host ... ssl:default".
    assert "connection refused" in out and "ssl:" not in out, out
    code, out = await cli("status", "--server", f"http://127.0.0.1:{free_port()}", token=None)
    assert code == 10 and "connection refused" in out and "ssl:" not in out, out
    code, out = await cli("track", "function_job", "J-1", "--server", stack.url, token="wrong")
    assert code == 10 and "401" in out
    code, out = await cli("status", "--server", stack.url, token=None)
    assert code == 10 and "401" in out


async def test_status_shows_active_trackings_and_recent_outcomes(stack: Stack) -> None:
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        for _ in range(3):
            rid = await stack.script(
                "net_operation_build", steps((0, "Queued"), (0.1, "Running"), (FOREVER, "Failed"))
            )
            await orch.track("net_operation_build", rid)
        done = await orch.track(
            "function_job", await stack.script("function_job", steps((0, "Completed")))
        )
        await orch.wait(done.tracking_id, poll_s=0.1, timeout_s=20)
        async with asyncio.timeout(20):
            while True:
                page = await orch.list_page(state="active", kind="net_operation_build")
                if sum(t.remote_status == "Running" for t in page.items) >= 3:
                    break
                await asyncio.sleep(0.1)
    code, out = await cli("status", "--server", stack.url, token=stack.token)
    assert code == 0, out
    assert "Active trackings" in out and "Recent outcomes" in out
    row = next(
        line for line in out.splitlines() if "net_operation_build" in line and "Running" in line
    )
    assert int(row.split("│")[-2]) >= 3
    assert done.tracking_id in out and "succeeded" in out


async def test_track_takes_the_filter_fields_of_the_kinds_found_by_filter(stack: Stack) -> None:
    code, out = await cli(
        "track", "trigger_work", "--trigger-binding-id", "bind-order-shipped",
        "--entity-id", "ord-cli", "--expect-jobs", "2", "--server", stack.url, token=stack.token,
    )  # fmt: skip
    assert code == 0, out
    assert "trigger_work (trigger_binding_id=bind-order-shipped entity_id=ord-cli" in out
    assert "expect_jobs=2" in out
    code, out = await cli(
        "track", "action_work", "--job-id", "job-cli-1", "--server", stack.url, token=stack.token
    )
    assert code == 0 and "action_work job-cli-1" in out, out
    code, out = await cli(
        "track", "trigger_work", "--entity-id", "e", "--server", stack.url, token=stack.token
    )
    assert code == 10 and "field trigger_binding_id" in out, out
    code, out = await cli("track", "--help", token=None)
    assert "--trigger-binding-id" in out and "--filter-correlation-id" in out


async def test_group_wait_exits_by_how_the_group_ended(stack: Stack) -> None:
    ok = [await stack.script("function_job", steps((0, "Queued"), (0.3, "Completed")))
          for _ in range(3)]  # fmt: skip
    bad = await stack.script("function_job", steps((0, "Queued"), (0.3, "Cancelled")))
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        items = [{"kind": "function_job", "remote_id": j} for j in ok]
        await orch.track_batch(items, group="cli-ok", seal=True)
        await orch.track("function_job", bad, group="cli-bad")
        await orch.seal_group("cli-bad")
        stuck = await stack.script("function_job", steps((0, "Queued"), (FOREVER, "Completed")))
        await orch.track("function_job", stuck, group="cli-late")
        await orch.seal_group("cli-late", timeout_s=0.5)
    code, out = await cli("group", "wait", "cli-ok", "--server", stack.url, token=stack.token)
    assert code == 0 and "3/3 ended" in out and "succeeded 3" in out, out
    code, out = await cli("group", "wait", "cli-bad", "--server", stack.url, token=stack.token)
    assert code == 1 and "cancelled 1" in out, out
    code, out = await cli("group", "wait", "cli-late", "--server", stack.url, token=stack.token)
    assert code == 3 and "deadline_exceeded" in out, out
    code, out = await cli("group", "show", "cli-ok", "--server", stack.url, token=stack.token)
    assert code == 0 and "completed" in out, out
    code, out = await cli("group", "show", "nope", "--server", stack.url, token=stack.token)
    assert code == 10 and "404" in out, out
