"""KubeRay delivered: `up` of examples/kuberay.yaml on the local cloud installs the fleet's reviewed CPU
template with pulumi-kubernetes, the cluster's agent runs the real KubeRay operator (built by `make tools`)
against the cluster's API server, and the cluster is `deployed` only once KubeRay itself reports the Ray
cluster ready.

One journey over one fleet (a cluster start is the expensive part): ready; a deleted worker recreated by
the operator; a NotReady CPU node failing the gate with Ray's conditions in the evidence, then a retry
that re-runs only the gates; disabling removing exactly the fleet's Ray objects; destroy leaving no
operator behind, its receipt naming the Ray objects. `make test` runs its first and last steps (preview,
ready, destroy: about 3 of its 10 minutes); the whole journey is `make test-long`'s.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import REPO, by_stack, npa, write_spec

from npa_pulumi.runtime.toolchain import find_kuberay_operator, kuberay_crd_files
from npa_pulumi.simulator.kube import binaries
from npa_pulumi.spec import constants as c

pytestmark = pytest.mark.integration

STACK = "cpu-ray.ray-example.cpu-ray"
DISABLED_STACK = "cpu-ray.ray-disabled.cpu-ray"


def _kubectl(kubeconfig: str, *args: str, check: bool = True) -> Any:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None, "make tools provides kubectl"
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not check and proc.returncode != 0:
        return None
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _operators(cloud_dir: Path) -> list[int]:
    """Live kuberay-operator processes whose kubeconfig lies in this test's local cloud."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"kuberay-operator" in cmdline and str(cloud_dir).encode() in environ:
            found.append(int(proc.name))
    return found


def _spec(tmp_path: Path, *, timeout_minutes: int = 3, enabled: bool = True) -> str:
    text = (REPO / "examples" / "kuberay.yaml").read_text()
    text = text.replace(
        "  enable_filestore: false\n",
        f"  enable_filestore: false\n  gpu_health_timeout_minutes: {timeout_minutes}\n",
    )
    if not enabled:
        text = text.replace(
            "  - name: ray-example\n",
            "  - name: ray-example\n    clusters:\n      - kuberay: { enabled: false }\n",
        )
    return str(write_spec(tmp_path / "fleet.yaml", text))


def _up(spec: str, code: int = 0) -> dict[str, Any]:
    result = npa(
        "up", "--spec", spec, "--cloud", "local", "--yes", "-j", "2", "--output", "json", timeout=1500
    )
    assert result.code == code, result.stderr[-5000:] + result.stdout[-3000:]
    return by_stack(result.json())


def _wait(what: str, probe: Any, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1.0)


def _ray_pods(kubeconfig: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = _kubectl(
        kubeconfig, "get", "pods", "-n", "ray", "-l", "ray.io/cluster=ray-cluster"
    )["items"]
    return pods


def _conditions(raycluster: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in raycluster.get("status", {}).get("conditions", [])}


@pytest.mark.timeout(2400)  # one journey over one fleet: seven `up`s, a preview, a destroy
@pytest.mark.parametrize(
    "whole",
    [pytest.param(False, id="ready-then-destroyed"), pytest.param(True, id="whole", marks=pytest.mark.long)],
)
def test_kuberay_journey(
    kube_api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    assert find_kuberay_operator() is not None, "make tools builds the KubeRay operator"
    # Two control planes start one after the other (their ports are picked under one lock); on a busy
    # machine that takes longer than the local cloud's default 30 s wait.
    monkeypatch.setenv("NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S", "300")
    cloud_dir = kube_api / ".npa-pulumi" / "local-cloud"
    npa("local-cloud", "init", check=True)
    spec = _spec(tmp_path)

    # ---- preview lists every object of the template, the policy pack sees the RayCluster
    previewed = npa("preview", "--spec", spec, "--cloud", "local", "--output", "json", timeout=900)
    assert previewed.code == 0, previewed.stderr[-4000:]
    types = {d["type"] for d in by_stack(previewed.json())[STACK]["diff"]}
    assert {
        "kubernetes:ray.io/v1:RayCluster",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        "kubernetes:apps/v1:Deployment",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "npa:fleet:FleetKubeRay",
        "pulumi-python:dynamic/npa:KubeRayGate",
    } <= types, types
    disabled_types = {d["type"] for d in by_stack(previewed.json())[DISABLED_STACK]["diff"]}
    assert "kubernetes:ray.io/v1:RayCluster" not in disabled_types

    # ---- up: deployed only with the Ray cluster ready
    stacks = _up(spec)
    ray = stacks[STACK]
    assert ray["status"] == "deployed", ray
    assert ray["kuberay"]["ready"] is True and ray["kuberay"]["ready_workers"] == 2
    assert ray["health"]["kuberay"]["conditions"]["RayClusterProvisioned"] == "True"
    assert stacks[DISABLED_STACK]["status"] == "deployed" and not stacks[DISABLED_STACK].get("kuberay")
    kubeconfig = ray["kubeconfig"]

    clusters = _kubectl(kubeconfig, "get", "rayclusters", "-A")["items"]
    assert len(clusters) == 1
    (raycluster,) = clusters
    assert _conditions(raycluster)["RayClusterProvisioned"] == "True"
    assert raycluster["status"]["readyWorkerReplicas"] == 2
    assert raycluster["spec"]["enableInTreeAutoscaling"] is False
    pods = _ray_pods(kubeconfig)
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker", "worker"]
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["image"] == c.RAY_IMAGE
        assert container["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert pod["spec"]["nodeSelector"]["nebius.com/node-group-name"] == "cpu-ray-ng-cpu"
    assert _kubectl(kubeconfig, "get", "services", "-n", "ray")["items"], "KubeRay made the head service"
    (policy,) = _kubectl(kubeconfig, "get", "networkpolicies", "-n", "ray")["items"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    crd = _kubectl(kubeconfig, "get", "crd", "rayclusters.ray.io")
    (ours,) = [json.loads(p.read_text()) for p in kuberay_crd_files() if p.name == "ray.io_rayclusters.json"]
    live_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert live_schema == ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # KubeRay's own, whole
    assert len(_operators(cloud_dir)) == 1, "one operator, for the one cluster that installed it"

    if whole:
        _faults_disable_and_enable_again(spec, tmp_path, ray, pods, kubeconfig, cloud_dir)

    # ---- destroyed: the receipt names the Ray objects, no operator is left
    done = npa("destroy", "--spec", spec, "--cloud", "local", "--yes", "--output", "json", timeout=900)
    assert done.code == 0, done.stderr[-4000:]
    receipt = json.loads(Path(done.json()["receipt"]).read_text())
    (phase,) = [p for p in receipt["phases"] if p["phase"] == "cluster" and p["stack"] == STACK]
    assert phase["status"] == "done"
    assert "RayCluster ray/ray-cluster" in phase["deletes"]["kuberay_objects"]
    _wait("no operator after destroy", lambda: not _operators(cloud_dir), 30)


def _faults_disable_and_enable_again(
    spec: str,
    tmp_path: Path,
    ray: dict[str, Any],
    pods: list[dict[str, Any]],
    kubeconfig: str,
    cloud_dir: Path,
) -> None:
    """The journey's middle: a worker recreated, a failed gate and its retry, disabled, enabled again."""
    # ---- a worker deleted out of band: the operator recreates it, status shows ready again
    worker = next(
        p["metadata"]["name"] for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
    )
    kubectl = binaries.find("kubectl")
    assert kubectl is not None
    deleted = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, "delete", "pod", "-n", "ray", worker, "--wait=false"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert deleted.returncode == 0, deleted.stderr

    def recreated() -> bool:
        names = {p["metadata"]["name"] for p in _ray_pods(kubeconfig)}
        return worker not in names and len(names) == 3

    _wait("the operator to recreate the worker", recreated)

    def status_ready() -> dict[str, Any] | None:
        entry = by_stack(npa("status", "--spec", spec, "--output", "json", check=True).json())[STACK]
        summary = entry.get("kuberay") or {}
        return (
            entry if summary.get("live") and summary.get("ready") and summary["ready_workers"] == 2 else None
        )

    assert _wait("status to show Ray ready again", status_ready, 120)["status"] == "deployed"

    # ---- the CPU node NotReady: the gates fail, Ray's conditions in the evidence, everything kept
    node = _kubectl(kubeconfig, "get", "nodes")["items"][0]["metadata"]["name"]
    fault = [
        "local-cloud",
        "fault",
        "node",
        "--cluster",
        ray["cluster_id"],
        "--node",
        node,
        "--kind",
        "not-ready",
    ]
    npa(*fault, check=True)
    failed = _up(_spec(tmp_path, timeout_minutes=1), code=1)[STACK]  # a gate setting changed: the gates run
    assert failed["status"] == "deployed-validation-failed", failed
    assert failed["retry_command"] and "up" in failed["retry_command"]
    ray_evidence = failed["health"]["kuberay"]
    assert ray_evidence["passed"] is False and ray_evidence["missing"]
    assert set(ray_evidence["conditions"]) >= {"RayClusterProvisioned", "HeadPodReady"}
    assert _kubectl(kubeconfig, "get", "rayclusters", "-A")["items"], "nothing was torn down"

    npa(*fault, "--clear", check=True)
    retried = _up(_spec(tmp_path, timeout_minutes=1))[STACK]
    assert retried["status"] == "deployed" and retried["kuberay"]["ready"] is True
    assert retried["changes"].get("create", 0) == 0 and retried["changes"].get("delete", 0) == 0
    changed = {d["type"].rsplit(":", 1)[-1] for d in retried["diff"]}
    assert changed == {"GpuHealthGate", "KubeRayGate"}, retried["diff"]  # only the gates ran again

    # ---- disabled: the fleet's Ray objects go, the cluster stays deployed
    disabled = _up(_spec(tmp_path, timeout_minutes=1, enabled=False))[STACK]
    assert disabled["status"] == "deployed" and not disabled.get("kuberay")
    assert disabled["changes"].get("delete", 0) >= 10
    assert _kubectl(kubeconfig, "get", "crd", "rayclusters.ray.io", check=False) is None
    assert _kubectl(kubeconfig, "get", "namespace", "ray", check=False) is None
    operator = ["get", "deployments", "-A", "-l", "app.kubernetes.io/name=kuberay-operator"]
    assert _kubectl(kubeconfig, *operator)["items"] == []
    assert _kubectl(kubeconfig, "get", "networkpolicies", "-A")["items"] == []
    assert _kubectl(kubeconfig, "get", "namespace", "npa-system")  # the fleet's other objects stay
    _wait("the operator to stop", lambda: not _operators(cloud_dir), 30)

    # ---- enabled again (the caller destroys it)
    again = _up(_spec(tmp_path, timeout_minutes=1))[STACK]
    assert again["status"] == "deployed" and again["kuberay"]["ready"] is True
    assert len(_operators(cloud_dir)) == 1
