"""The sidecar as its users run it: the real Dockerfile built, the image run, stopped,
restarted and hardened as docs/operations.md says, and deploy/kubernetes/pod.yaml
played as a pod.

Everything runs on 127.0.0.1 and on a podman network this module makes; the
Moltaro workspace is the bundled simulator in a container of the same image.
See tests/container/podman.py for how podman is found (and why CI never skips).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.container.conftest import FIGURES
from tests.container.podman import (
    PREFIX,
    Http,
    host_port,
    inspect,
    logs,
    podman,
    process_status,
    require_podman,
    until,
    version,
    wait_exit,
    wait_ready,
)
from tests.serveproc import free_port

pytestmark = pytest.mark.timeout(600)  # a cold build of the image is part of the first test

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
OPERATIONS = REPO / "docs" / "operations.md"
TOKEN = secrets.token_urlsafe(16)
# What docs/operations.md tells users to give the container (above the drain's
# shutdown_grace_s + shutdown_hard_s, 15 s by default).
STOP_TIMEOUT_S = 30
HARDENED = ["--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL",
            "--security-opt", "no-new-privileges"]  # fmt: skip
SIM = f"{PREFIX}-moltaro"
TERMINAL_TYPES = re.compile(r"com\.moltaro\.orchestrator\.tracking\.(?!status_changed|occurrence)")


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The Dockerfile as it is, built into a tag of this session, removed afterwards."""
    require_podman()
    tag = f"localhost/{PREFIX}:latest"
    started = time.monotonic()
    # --layers=false: no intermediate images are left behind to clean up.
    podman("build", "--format", "docker", "--layers=false", "-q", "-t", tag, str(REPO),
           timeout=480)  # fmt: skip
    FIGURES["build"] = f"{time.monotonic() - started:.0f} s (podman build, no cache)"
    size = int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout)
    FIGURES["size"] = f"{size / 1e6:.0f} MB"
    try:
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)


@pytest.fixture(scope="module")
def network(image: str) -> Iterator[str]:
    name = f"{PREFIX}-net"
    podman("network", "create", name)
    try:
        yield name
    finally:
        podman("network", "rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def simulator(image: str, network: str) -> Iterator[Http]:
    """``orchestrator simulate`` in the image, on the network as ``SIM``, its port on
    127.0.0.1 for the tests to script jobs."""
    podman("run", "-d", "--name", SIM, "--network", network, "-p", "127.0.0.1::5080",
           *HARDENED, image, "simulate", "--listen", "0.0.0.0:5080", "--profile", "fast")  # fmt: skip
    try:
        sim = Http(host_port(SIM, 5080))
        wait_ready(SIM, sim, "/_sim/stats")
        yield sim
    finally:
        podman("rm", "-f", "-v", "-t", "0", SIM, check=False)


class Made:
    """Containers and volumes a test made, removed when it ends."""

    def __init__(self) -> None:
        self.containers: list[str] = []
        self.volumes: list[str] = []

    def volume(self, suffix: str) -> str:
        name = f"{PREFIX}-{suffix}"
        podman("volume", "create", name)
        self.volumes.append(name)
        return name

    def service(self, image: str, name: str, volume: str, *args: str, env: dict[str, str]) -> str:
        """The orchestrator as docs/operations.md runs it: hardened, its port on loopback."""
        name = f"{PREFIX}-{name}"
        self.containers.append(name)
        flags = [f"--env={k}={v}" for k, v in env.items()]
        podman("run", "-d", "--name", name, "-p", "127.0.0.1::8080", *HARDENED,
               "--stop-timeout", str(STOP_TIMEOUT_S), "-v", f"{volume}:/data", *flags, *args,
               image)  # fmt: skip
        return name


@pytest.fixture
def made() -> Iterator[Made]:
    things = Made()
    try:
        yield things
    finally:
        for name in things.containers:
            podman("rm", "-f", "-v", "-t", "0", name, check=False)
        for name in things.volumes:
            podman("volume", "rm", "-f", name, check=False)


def service_env(**extra: str) -> dict[str, str]:
    return {
        "ORCH_API_TOKENS": TOKEN,
        "WORKSPACE_API_BASE_URL": f"http://{SIM}:5080",
        "ORCH_POLLING__INITIAL_DELAY_S": "0.2",
        "ORCH_POLLING__MAX_DELAY_S": "1",
        **extra,
    }


def scripted_job(sim: Http, complete_after_s: float) -> str:
    steps = [
        {"after_s": 0, "status": "Queued"},
        {"after_s": 0.3, "status": "Leased"},
        {"after_s": complete_after_s, "status": "Completed",
         "run": {"Status": "Success", "ResultSummary": "3 invoices"}},
    ]  # fmt: skip
    return str(sim.call("POST", "/_sim/script", {"kind": "function_job", "steps": steps})["id"])


def terminal(api: Http, tracking_id: str) -> dict[str, Any] | None:
    tracking: dict[str, Any] = api.call("GET", f"/v1/trackings/{tracking_id}")
    return tracking if tracking["state"] == "terminal" else None


def test_the_image_serves_as_uid_10001_hardened_and_healthy(
    image: str, network: str, simulator: Http, made: Made
) -> None:
    config = inspect(image)["Config"]
    assert config["User"] == "10001:10001" and config["StopSignal"] in ("SIGTERM", "15")
    assert "/data" in config["Volumes"] and "8080/tcp" in config["ExposedPorts"]
    assert config["Entrypoint"] == ["orchestrator"] and config["Cmd"] == ["serve"]
    assert inspect(image)["Healthcheck"]["Test"] == ["CMD", "orchestrator", "health"]

    started = time.monotonic()
    name = made.service(image, "serve", made.volume("serve-data"), "--network", network,
                        env=service_env())  # fmt: skip
    api = Http(host_port(name), TOKEN)
    wait_ready(name, api)
    FIGURES["ready"] = f"{time.monotonic() - started:.1f} s after podman run returned"

    assert api.raw("GET", "/healthz", auth=False)[0] == 200
    assert json.loads(api.raw("GET", "/readyz", auth=False)[1])["status"] == "ready"
    assert api.raw("GET", "/v1/trackings", auth=False)[0] == 401  # tokens are on
    # The image's HEALTHCHECK, run by hand (podman's timers need systemd).
    assert podman("healthcheck", "run", name, check=False).returncode == 0
    assert inspect(name)["State"]["Health"]["Status"] == "healthy"

    # One process, the service, as uid/gid 10001, with no capability left and
    # no way to gain privileges; the root filesystem cannot be written.
    status = process_status(name)
    assert status["Uid"].split() == ["10001"] * 4 and status["Gid"].split() == ["10001"] * 4
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    cmdline = podman("exec", name, "cat", "/proc/1/cmdline").stdout.split("\0")
    assert "orchestrator" in cmdline[1] and "serve" in cmdline
    for path in ("/opt/venv/probe", "/tmp/probe", "/etc/probe"):
        denied = podman("exec", name, "touch", path, check=False)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr, path
    owner = podman("exec", name, "stat", "-c", "%u:%g", "/data/orchestrator.db").stdout
    assert owner.strip() == "10001:10001"
    # What the locked dependencies need at run time: a CA bundle, the Rust extension.
    assert podman("exec", name, "test", "-s", "/etc/ssl/certs/ca-certificates.crt",
                  check=False).returncode == 0  # fmt: skip
    podman("exec", name, "python", "-c", "import pyreqwest, uvloop, orjson")


def test_a_job_on_the_simulator_is_tracked_to_its_end_through_the_published_port(
    image: str, network: str, simulator: Http, made: Made
) -> None:
    name = made.service(image, "track", made.volume("track-data"), "--network", network,
                        env=service_env())  # fmt: skip
    api = Http(host_port(name), TOKEN)
    wait_ready(name, api)
    job = scripted_job(simulator, complete_after_s=1.0)
    created = api.call("POST", "/v1/trackings", {"kind": "function_job", "remote_id": job})
    final = until("the tracking ends", lambda: terminal(api, created["tracking_id"]), 60)
    assert final["outcome"] == "succeeded" and final["remote_status"] == "Completed", final
    assert final["result"]["result_summary"] == "3 invoices"
    # The simulator saw the orchestrator's reads of that job, over the network.
    requests = simulator.call("GET", f"/_sim/requests?id={job}")["requests"]
    reads = [r for r in requests if r["route"] == "job_status"]
    assert reads and all(r["status"] == 200 for r in reads), requests
    metrics = api.raw("GET", "/metrics", auth=False)[1]
    assert re.search(
        r'orchestrator_trackings_terminal_total\{kind="function_job",outcome="succeeded",'
        r'workspace="default"\} 1\.0',
        metrics,
    )


def test_sigterm_drains_and_exits_0_and_a_restart_on_the_volume_resumes_each_tracking_once(
    image: str, network: str, simulator: Http, made: Made
) -> None:
    assert f"--stop-timeout {STOP_TIMEOUT_S}" in OPERATIONS.read_text()
    volume = made.volume("restart-data")
    first = made.service(image, "before", volume, "--network", network, env=service_env())
    api = Http(host_port(first), TOKEN)
    wait_ready(first, api)
    jobs = [scripted_job(simulator, complete_after_s=6.0) for _ in range(3)]
    ids = [
        api.call("POST", "/v1/trackings", {"kind": "function_job", "remote_id": job})["tracking_id"]
        for job in jobs
    ]

    def all_polled() -> bool:
        trackings = [api.call("GET", f"/v1/trackings/{t}") for t in ids]
        return all(t["polls"] >= 1 and t["state"] == "active" for t in trackings)

    until("every tracking is polled once", all_polled, 30)
    started = time.monotonic()
    podman("stop", first, timeout=STOP_TIMEOUT_S + 30)  # SIGTERM, SIGKILL after the timeout
    FIGURES["stop"] = f"{time.monotonic() - started:.1f} s from podman stop to exit"
    state = inspect(first)["State"]
    assert state["ExitCode"] == 0, logs(first)[-3000:]  # 137 would be a SIGKILL
    log = logs(first)
    assert '"msg":"draining"' in log and '"msg":"stopped"' in log
    assert "Traceback" not in log and TOKEN not in log

    second = made.service(image, "after", volume, "--network", network, env=service_env())
    api = Http(host_port(second), TOKEN)
    wait_ready(second, api)
    assert re.search(r'"msg":"resumed active trackings","count":3\b', logs(second))
    finals = [until("resumed trackings end", lambda t=t: terminal(api, t), 60) for t in ids]
    assert {f["outcome"] for f in finals} == {"succeeded"}
    events = api.call("GET", "/v1/events?after=0&limit=1000")["events"]
    ended = Counter(e["subject"] for e in events if TERMINAL_TYPES.match(e["type"]))
    assert ended == dict.fromkeys(ids, 1), events
    owner = podman("exec", second, "stat", "-c", "%u", "/data/orchestrator.db").stdout
    assert owner.strip() == "10001"
    assert podman("stop", second, timeout=STOP_TIMEOUT_S + 30).returncode == 0
    assert inspect(second)["State"]["ExitCode"] == 0


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no token", ["server.api_tokens_env", "ORCH_API_TOKENS"]),
        ("a bad key", ["polling.jitter"]),
        ("a root-owned bind mount", ["/data", "uid 10001", "chown 10001:10001", "fsGroup"]),
        ("an arbitrary uid", ["/data", "uid 1000680000", "ORCH_STORE__PATH"]),
    ],
)
def test_a_bad_start_up_is_one_line_and_exit_2(
    image: str, made: Made, tmp_path: Path, case: str, expected: list[str]
) -> None:
    env = service_env(WORKSPACE_API_BASE_URL="http://127.0.0.1:9")
    volume, args = made.volume(f"bad-{len(made.volumes)}"), []
    if case == "no token":
        env.pop("ORCH_API_TOKENS")
    elif case == "a bad key":
        env["ORCH_POLLING__JITTER"] = "5"
    elif case == "a root-owned bind mount":
        (tmp_path / "data").mkdir(mode=0o755)  # root's, as a host directory usually is
        volume = str(tmp_path / "data")
    else:
        args = ["--user", "1000680000:0"]  # OpenShift's way: any uid, group 0
    name = made.service(image, f"bad-{case.replace(' ', '-')}", volume, *args, env=env)
    assert wait_exit(name) == 2, logs(name)
    lines = [line for line in logs(name).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("orchestrator: ") and "Traceback" not in lines[0]
    assert all(word in lines[0] for word in expected), lines[0]


def manifests() -> dict[str, list[dict[str, Any]]]:
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted(DEPLOY.glob("*.yaml"))}


def test_the_kubernetes_manifests_validate_against_a_current_release() -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    release = latest_version()  # the newest schemas the package ships (offline)
    assert tuple(map(int, release.split(".")[:2])) >= (1, 33)
    found = manifests()
    assert set(found) == {"pod.yaml", "secret.yaml"}
    # The StatefulSet and Secret of docs/operations.md too.
    for block in re.findall(r"```yaml\n(.*?)```", OPERATIONS.read_text(), re.S):
        found[f"operations.md: {block[:30]}"] = list(yaml.safe_load_all(block))
    for where, docs in found.items():
        for doc in docs:
            kubernetes_validate.validate(doc, release, strict=True)  # raises on any fault
            assert doc["metadata"]["name"], where
    pod = next(d for d in found["pod.yaml"] if d["kind"] == "Pod")
    spec = pod["spec"]
    assert spec["terminationGracePeriodSeconds"] >= STOP_TIMEOUT_S > 15
    assert spec["securityContext"]["runAsUser"] == spec["securityContext"]["fsGroup"] == 10001
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8080"
    for container in spec["containers"]:
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, container["name"]


def test_the_pod_manifest_runs_with_podman_kube_play(
    image: str, network: str, tmp_path: Path
) -> None:
    """deploy/kubernetes/pod.yaml as written, but for what isolates the test: its
    image is this session's, its names carry the session's prefix, and the
    orchestrator's port is published on 127.0.0.1 at a free port (podman 4 publishes
    every containerPort on the host; Kubernetes does not)."""
    found = manifests()
    pvc, pod = found["pod.yaml"]
    [secret] = found["secret.yaml"]
    pod_name, claim = f"{PREFIX}-{pod['metadata']['name']}", f"{PREFIX}-{pvc['metadata']['name']}"
    secret_name = f"{PREFIX}-{secret['metadata']['name']}"
    pod["metadata"]["name"], pvc["metadata"]["name"] = pod_name, claim
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = claim
    metrics_port = free_port()
    for container in pod["spec"]["containers"]:
        container["image"] = image
        for env in container.get("env", []):
            if "valueFrom" in env:
                env["valueFrom"]["secretKeyRef"]["name"] = secret_name
        for port in container.get("ports", []):
            port.update(hostIP="127.0.0.1", hostPort=metrics_port)
    played = tmp_path / "pod.yaml"
    played.write_text(yaml.safe_dump_all([pvc, pod]))
    # kube play builds podman's pause image for the pod's infra container if missing.
    pause_images = podman("images", "-q", "--filter", "reference=localhost/podman-pause").stdout
    secret["metadata"]["name"] = secret_name
    try:
        if version() < (4, 4):
            # podman 4.3 stores a played Secret as YAML and reads it back as JSON of
            # base64 values (podman issue 16269): create it in the form it reads.
            values = {
                k: base64.b64encode(v.encode()).decode() for k, v in secret["stringData"].items()
            }
            (tmp_path / "secret.json").write_text(json.dumps(values))
            podman("secret", "create", secret_name, str(tmp_path / "secret.json"))
        else:
            (tmp_path / "secret.yaml").write_text(yaml.safe_dump(secret))
            podman("kube", "play", str(tmp_path / "secret.yaml"))
        podman("kube", "play", "--network", network, str(played), timeout=120)
        app, orchestrator = f"{pod_name}-app", f"{pod_name}-orchestrator"

        def tracked() -> dict[str, Any] | None:
            lines = [line for line in logs(app).splitlines() if line.startswith("{")]
            return json.loads(lines[0]) if lines else None

        line = until("the app tracks a job through its sidecar", tracked, 120)
        # The simulator draws each job's outcome: either is the job's real end.
        assert line["outcome"] in ("succeeded", "failed") and line["polls"] >= 1, line
        status = process_status(orchestrator)
        assert status["Uid"].split()[0] == "10001" and status["NoNewPrivs"] == "1"
        assert (
            int(status["CapEff"], 16) == 0 and inspect(orchestrator)["HostConfig"]["ReadonlyRootfs"]
        )
        # The liveness probe as written passes; Prometheus would scrape the annotated port.
        assert podman("healthcheck", "run", orchestrator, check=False).returncode == 0
        scraped = Http(metrics_port).raw("GET", "/metrics", auth=False)[1]
        assert re.search(
            rf'orchestrator_trackings_terminal_total\{{kind="function_job",outcome="{line["outcome"]}"'
            r',workspace="default"\} 1\.0',
            scraped,
        )
        # terminationGracePeriodSeconds, given by hand (podman 4 does not read it):
        # every container ends on SIGTERM within it.
        grace = str(pod["spec"]["terminationGracePeriodSeconds"])
        podman("pod", "stop", "-t", grace, pod_name, timeout=int(grace) + 30)
        for container in pod["spec"]["containers"]:
            name = f"{pod_name}-{container['name']}"
            assert inspect(name)["State"]["ExitCode"] == 0, (name, logs(name)[-2000:])
        assert secret["stringData"]["api-token"] not in logs(orchestrator)
    finally:
        # The image's VOLUME gives the app and the simulator an anonymous /data each.
        names = podman("ps", "-a", "-q", "--filter", f"pod={pod_name}", check=False).stdout.split()
        volumes = {claim} | {
            m["Name"] for n in names for m in inspect(n)["Mounts"] if m["Type"] == "volume"
        }
        podman("pod", "rm", "-f", "-t", "0", pod_name, check=False)
        for volume in volumes:
            podman("volume", "rm", "-f", volume, check=False)
        if not pause_images.strip():
            pause = ["images", "-q", "--filter", "reference=localhost/podman-pause"]
            podman("rmi", "-f", *podman(*pause, check=False).stdout.split(), check=False)
        podman("secret", "rm", secret_name, check=False)
