"""Clusters you can reach: every local cluster is a real Kubernetes API server (kube-apiserver, etcd,
controller manager and scheduler, with kwok nodes), `up` writes a kubeconfig per cluster, and the fleet's
own objects are pulumi-kubernetes resources of the cluster stack.

A two-project fleet, one GPU cluster (RTX rendering: the GPU operator runs the profile's values, and the
fleet's repository ConfigMap sits in the operator's namespace, mounted by every driver pod) and one
CPU-only cluster, is deployed; `kubectl` with the written kubeconfigs finds exactly the nodes the spec asks
for, the recipe's objects and the fleet's namespace; verify-graphics passes on the RTX worker and fails
closed on a broken one; scaling a node group changes the nodes; destroying a cluster stops its control
plane and removes its kubeconfig; `local-cloud reset` leaves no process behind. The driver's drifts
(its repository file, its mounts, a stale pod) fail verify-graphics closed in a long test of the RTX
cluster alone (`make test-long`).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import assert_publishable, by_stack, inventory, npa, private_evidence, write_spec

from npa_pulumi.plan.rtx_values import rtx_operator_values
from npa_pulumi.runtime.toolchain import find_pulumi
from npa_pulumi.simulator.kube import binaries

pytestmark = pytest.mark.integration

REPOSITORY = "deb https://mirror.example/ubuntu noble main\n"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: reach
region: us-central1
project_prefix: "reach-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: 1
projects:
  - name: gpu
    clusters:
      - name: render
        gpu_nodes: {count: GPU_COUNT, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb}
        gpu_workload_profile: rtx-rendering
        gpu_driver_package_repositories:
          ubuntu-noble.sources: "deb https://mirror.example/ubuntu noble main\\n"
  - project_id: project-existing1
    clusters:
      - name: cpu
        cpu_nodes: {count: 2}
"""


# Where SPEC's second project begins: the spec before it holds the RTX cluster alone.
RENDER_ONLY_CUT = "  - project_id: project-existing1\n"


def _spec(tmp_path: Path, gpu_count: int) -> Path:
    return write_spec(tmp_path / "fleet.yaml", SPEC.replace("GPU_COUNT", str(gpu_count)))


def _kubectl(kubeconfig: str, *args: str) -> Any:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None, "make tools provides kubectl"
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


REPOSITORIES_CM = ["get", "configmap", "-n", "gpu-operator", "gpu-driver-package-repositories"]


def _assert_rtx_operator_values(kubeconfig: str) -> None:
    """The GPU operator runs the RTX values (plan/rtx_values.py): the driver selects exactly the pool and
    carries the values' revision, each driver pod mounts the repository file read-only under the Ubuntu
    sources directory, the toolkit reads containerd's config file, RDMA is off."""
    values = rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", {"ubuntu-noble.sources": REPOSITORY})
    driver = _kubectl(kubeconfig, "get", "-n", "gpu-operator", "daemonset", "nvidia-driver-daemonset")
    template = driver["spec"]["template"]
    assert template["metadata"]["annotations"]["npa.nebius.com/rtx-values-revision"] == values.revision()
    selector = template["spec"]["nodeSelector"]
    assert (selector["nebius.com/platform"], selector["nebius.com/preset"]) == (
        "gpu-rtx6000",
        "1gpu-24vcpu-218gb",
    )
    mount = {
        "name": "gpu-driver-package-repositories",
        "mountPath": "/etc/apt/sources.list.d/ubuntu-noble.sources",
        "subPath": "ubuntu-noble.sources",
        "readOnly": True,
    }
    pods = [
        p
        for p in _kubectl(kubeconfig, "get", "pods", "-n", "gpu-operator")["items"]
        if p["metadata"]["name"].startswith("nvidia-driver-daemonset")
    ]
    assert pods and all(mount in p["spec"]["containers"][0]["volumeMounts"] for p in pods)
    toolkit = _kubectl(
        kubeconfig, "get", "-n", "gpu-operator", "daemonset", "nvidia-container-toolkit-daemonset"
    )
    [container] = toolkit["spec"]["template"]["spec"]["containers"]
    assert {"name": "RUNTIME_CONFIG_SOURCE", "value": "file"} in container["env"]
    [policy] = _kubectl(kubeconfig, "get", "clusterpolicies")["items"]
    assert policy["spec"]["driver"]["rdma"] == {"enabled": False}
    assert policy["spec"]["driver"]["repoConfig"] == {"configMapName": "gpu-driver-package-repositories"}


def _up(spec: Path) -> dict[str, Any]:
    result = npa("up", "--spec", str(spec), "--cloud", "local", "--yes", "-j", "2", "--output", "json")
    assert result.code == 0, result.stderr[-4000:] + result.stdout[-3000:]
    return by_stack(result.json())


def _control_plane_processes(cloud_dir: Path) -> list[str]:
    """Live (not zombie) processes whose command line names this test's local cloud."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and str(cloud_dir) in cmdline:
            found.append(cmdline[:160])
    return found


def _stack_resource_types(home: Path, stack: str) -> set[str]:
    env = {
        **os.environ,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_BACKEND_URL": f"file://{home / '.npa-pulumi' / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(home / ".npa-pulumi" / "passphrase"),
    }
    proc = subprocess.run(
        [str(find_pulumi()), "stack", "export", "--stack", stack],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return {r["type"] for r in json.loads(proc.stdout)["deployment"]["resources"]}


def _nodes_by_group(kubeconfig: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for node in _kubectl(kubeconfig, "get", "nodes")["items"]:
        groups.setdefault(node["metadata"]["labels"]["nebius.com/node-group-name"], []).append(node)
    return groups


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_clusters_are_reachable_kubernetes_apis(kube_api: Path, tmp_path: Path) -> None:
    cloud_dir = kube_api / ".npa-pulumi" / "local-cloud"
    npa("local-cloud", "init", check=True)
    stacks = _up(_spec(tmp_path, gpu_count=1))
    render, cpu = stacks["reach.gpu.render"], stacks["reach.project-existing1.cpu"]
    assert render["status"] == cpu["status"] == "deployed"
    # the RTX rendering cluster's gate ran the CUDA and the GLX/EGL/Vulkan smokes on its GPU node
    [rtx_node] = [v for v in render["health"]["nodes"].values() if v.get("gpu")]
    assert rtx_node["smoke"]["passed"] and rtx_node["smoke"]["graphics"]["passed"]
    assert cpu["validation"] == "cluster-basics" and cpu["health"]["passed"]

    # ---- kubeconfigs: one per cluster, private, registered
    for entry in (render, cpu):
        assert entry["kube_context"] == f"fleet-reach-{entry['project_key']}-{entry['cluster_name']}"
        path = Path(entry["kubeconfig"])
        assert path == kube_api / ".npa-pulumi" / "kubeconfigs" / f"{entry['kube_context']}.yaml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        registration = json.loads(
            (kube_api / ".npa-pulumi" / "clusters" / f"{entry['kube_context']}.json").read_text()
        )
        assert registration["cluster_id"] == entry["cluster_id"]
        assert registration["stack"] == entry["stack"] and registration["kubeconfig"] == str(path)
        # ... and registered where the original's other commands read it (engine/registrations/npa_records.py)
        record_dir = kube_api / ".npa" / "clusters" / entry["kube_context"]
        assert registration["npa_record"] == str(record_dir)
        assert sorted(p.name for p in record_dir.iterdir()) == ["cluster.json", "kubeconfig", "metadata.json"]
        assert {stat.S_IMODE((record_dir / n).stat().st_mode) for n in ("kubeconfig", "cluster.json")} == {
            0o600
        }
        assert (record_dir / "kubeconfig").read_text() == path.read_text()
        record = json.loads((record_dir / "cluster.json").read_text())
        assert (record["name"], record["cluster_id"], record["provider_name"]) == (
            entry["kube_context"],
            entry["cluster_id"],
            entry["cluster_name"],
        )
        assert record["project_id"] == entry["project_id"] and record["last_seen_state"] == "RUNNING"
        metadata = json.loads((record_dir / "metadata.json").read_text())
        assert (metadata["managed_by"], metadata["fleet"], metadata["project_key"]) == (
            "npa fleet",
            "reach",
            entry["project_key"],
        )
    render_record = json.loads(
        (kube_api / ".npa" / "clusters" / render["kube_context"] / "cluster.json").read_text()
    )
    assert (render_record["node_count"], render_record["node_platform"]) == (2, "gpu-rtx6000")  # CPU + GPU

    # ---- the GPU cluster: exactly the spec's nodes, shaped like Nebius's
    groups = _nodes_by_group(render["kubeconfig"])
    assert sorted(groups) == ["render-ng-cpu", "render-ng-gpu-0"]
    assert len(groups["render-ng-cpu"]) == 1 and len(groups["render-ng-gpu-0"]) == 1
    gpu_node = groups["render-ng-gpu-0"][0]
    assert _ready(gpu_node)
    labels = gpu_node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "gpu-rtx6000"
    assert labels["nebius.com/preset"] == "1gpu-24vcpu-218gb"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
    assert gpu_node["status"]["capacity"]["nvidia.com/gpu"] == "1"
    assert gpu_node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert gpu_node["status"]["capacity"]["cpu"] == "24"
    assert gpu_node["status"]["nodeInfo"]["bootID"]
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in gpu_node["spec"]["taints"]
    cpu_node = groups["render-ng-cpu"][0]
    assert "nvidia.com/gpu" not in cpu_node["status"]["capacity"]
    assert not cpu_node["spec"].get("taints")

    # ---- the recipe's objects, and the fleet's own (through pulumi-kubernetes)
    classes = {
        sc["metadata"]["name"] for sc in _kubectl(render["kubeconfig"], "get", "storageclass")["items"]
    }
    assert classes == {"compute-csi-default-sc"}  # no filestore in this spec
    daemonsets = _kubectl(render["kubeconfig"], "get", "daemonsets", "-n", "gpu-operator")["items"]
    assert "nvidia-device-plugin-daemonset" in {d["metadata"]["name"] for d in daemonsets}
    namespace = _kubectl(render["kubeconfig"], "get", "namespace", "npa-system")
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "npa-pulumi"
    # the repositories ConfigMap lives in the operator's namespace, where driver.repoConfig finds it
    configmap = _kubectl(render["kubeconfig"], *REPOSITORIES_CM)
    assert configmap["data"] == {"ubuntu-noble.sources": REPOSITORY}
    assert configmap["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "npa-pulumi"
    _assert_rtx_operator_values(render["kubeconfig"])
    types = _stack_resource_types(kube_api, "reach.gpu.render")
    assert {
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ConfigMap",
        "pulumi:providers:kubernetes",
    } <= types

    # ---- the CPU-only cluster: two CPU nodes, no GPU objects, the namespace but no RTX ConfigMap
    cpu_groups = _nodes_by_group(cpu["kubeconfig"])
    assert {name: len(nodes) for name, nodes in cpu_groups.items()} == {"cpu-ng-cpu": 2}
    assert all(_ready(n) for n in cpu_groups["cpu-ng-cpu"])
    # upstream installs the GPU operator release on every cluster that is not driver-full (helm.tf), a
    # CPU-only one too: its DaemonSets are there, and nothing else is
    cpu_daemonsets = _kubectl(cpu["kubeconfig"], "get", "daemonsets", "-A")["items"]
    assert {d["metadata"]["namespace"] for d in cpu_daemonsets} <= {"gpu-operator"}
    assert _kubectl(cpu["kubeconfig"], "get", "configmaps", "-A", "-l", "npa.nebius.com/fleet")["items"] == []
    cpu_types = _stack_resource_types(kube_api, "reach.project-existing1.cpu")
    assert "kubernetes:core/v1:Namespace" in cpu_types and "kubernetes:core/v1:ConfigMap" not in cpu_types

    # ---- local-cloud show gives each cluster's API endpoint
    apis = {c["id"]: c["kube_api"] for c in inventory()["mk8s_clusters"]}
    assert apis[render["cluster_id"]].startswith("https://127.0.0.1:")

    # ---- npa-pulumi kubeconfig prints both contexts, or merges them into a file
    printed = npa("kubeconfig", "--spec", str(tmp_path / "fleet.yaml"), "--output", "json", check=True).json()
    contexts = {c["name"] for c in printed["kubeconfig"]["contexts"]}
    assert contexts == {render["kube_context"], cpu["kube_context"]}
    merged = tmp_path / "merged-kubeconfig"
    npa(
        "kubeconfig",
        "--spec",
        str(tmp_path / "fleet.yaml"),
        "--only-clusters",
        "cpu",
        "--merge-into",
        str(merged),
        check=True,
    )
    assert stat.S_IMODE(merged.stat().st_mode) == 0o600
    assert _kubectl(str(merged), "get", "nodes", "--context", cpu["kube_context"])["items"]

    # ---- verify-graphics: CUDA and GLX/EGL/Vulkan on the RTX worker; a CPU cluster is refused
    evidence_dir = tmp_path / "evidence"
    private = ["--evidence-dir", str(evidence_dir)]
    graphics = npa("verify-graphics", "--spec", str(tmp_path / "fleet.yaml"), *private, "--output", "json")
    assert graphics.code == 1  # the CPU-only cluster is not an RTX rendering cluster
    assert_publishable(graphics, evidence_dir)
    verdicts = {c["cluster_name"]: c for c in graphics.json()["clusters"]}
    assert verdicts["render"]["status"] == "ready", verdicts["render"]
    assert [n["passed"] for n in verdicts["render"]["health"]["nodes"]] == [True]
    [receipt] = private_evidence(evidence_dir).values()
    [worker] = receipt["evidence"]["workers"].values()
    assert worker["cuda"]["passed"] and worker["graphics"]["passed"] and worker["graphics"]["cleaned_up"]
    assert (verdicts["cpu"]["status"], verdicts["cpu"]["error"]) == ("failed", "not an RTX rendering cluster")

    only_render = ["--spec", str(tmp_path / "fleet.yaml"), "--only-clusters", "render", "--output", "json"]
    # ---- a broken RTX worker (its workloads fail): verify-graphics fails closed on it, no probe pod left
    rtx_name = next(n for n, v in render["health"]["nodes"].items() if v.get("gpu"))
    fault = ["local-cloud", "fault", "node", "--cluster", render["cluster_id"], "--node", rtx_name]
    npa(*fault, "--kind", "pod-failure", check=True)
    deadline = time.monotonic() + 30
    while rtx_name not in json.dumps(_kubectl(render["kubeconfig"], "get", "stage", "npa-pod-failure")):
        assert time.monotonic() < deadline, "the pod-failure fault never reached the cluster's API"
        time.sleep(0.5)
    time.sleep(1.0)  # kwok picks the changed Stage up from its watch
    broken = npa("verify-graphics", *only_render, *private)
    npa(*fault, "--kind", "pod-failure", "--clear", check=True)
    assert broken.code == 1, broken.stdout[-3000:]
    assert_publishable(broken, evidence_dir)
    [verdict] = broken.json()["clusters"]
    assert verdict["status"] == "not-ready" and "1 of 1 node(s) failed" in verdict["error"], verdict
    assert verdict["health"]["failure_categories"]["cuda"] == 1
    [receipt] = private_evidence(evidence_dir).values()
    assert rtx_name in receipt["error"]
    [worker] = receipt["evidence"]["workers"].values()
    assert not worker["cuda"]["passed"] and worker["cuda"]["cleaned_up"] and worker["graphics"]["cleaned_up"]
    probes = _kubectl(
        render["kubeconfig"], "get", "pods", "-A", "-l", "app.kubernetes.io/managed-by=npa-gpu-health"
    )
    assert probes["items"] == []

    # ---- scaling the GPU pool changes the nodes in the API
    stacks = _up(_spec(tmp_path, gpu_count=2))
    assert stacks["reach.gpu.render"]["status"] == "deployed"
    assert stacks["reach.project-existing1.cpu"]["status"] == "unchanged"
    groups = _nodes_by_group(stacks["reach.gpu.render"]["kubeconfig"])
    assert len(groups["render-ng-gpu-0"]) == 2 and all(_ready(n) for n in groups["render-ng-gpu-0"])

    # ---- verify-graphics --reconcile on the two RTX workers (the skill's repairs, kube/gpu_health/repair.py)
    _graphics_repairs(
        kube_api, tmp_path, render, sorted(n["metadata"]["name"] for n in groups["render-ng-gpu-0"])
    )

    # ---- a cluster deleted behind the fleet's back: up recreates it, with fresh credentials and objects
    npa(
        "local-cloud",
        "api",
        "delete_cluster",
        "--args",
        json.dumps({"cluster_id": cpu["cluster_id"]}),
        check=True,
    )
    repaired = _up(_spec(tmp_path, gpu_count=2))["reach.project-existing1.cpu"]
    assert repaired["status"] == "deployed" and repaired["health"]["passed"], repaired
    assert len(_kubectl(repaired["kubeconfig"], "get", "nodes")["items"]) == 2
    assert (
        _kubectl(repaired["kubeconfig"], "get", "namespace", "npa-system")["metadata"]["name"] == "npa-system"
    )

    # ---- destroying a cluster stops its control plane and removes its kubeconfig
    render_dir = cloud_dir / "kube" / render["cluster_id"]
    assert render_dir.is_dir() and _control_plane_processes(render_dir)
    result = npa(
        "destroy",
        "--spec",
        str(tmp_path / "fleet.yaml"),
        "--only-projects",
        "gpu",
        "--yes",
        "--output",
        "json",
    )
    assert result.code == 0, result.stderr[-4000:]
    assert not Path(render["kubeconfig"]).exists()
    assert not (kube_api / ".npa-pulumi" / "clusters" / f"{render['kube_context']}.json").exists()
    assert not (kube_api / ".npa" / "clusters" / render["kube_context"]).exists()  # the original's record too
    assert (kube_api / ".npa" / "clusters" / cpu["kube_context"] / "cluster.json").exists()
    assert not render_dir.exists() and _control_plane_processes(render_dir) == []
    assert Path(cpu["kubeconfig"]).exists()  # the other cluster is untouched

    # ---- reset leaves nothing running
    assert _control_plane_processes(cloud_dir)
    npa("local-cloud", "reset", "--yes", check=True)
    assert _control_plane_processes(cloud_dir) == []

    # ---- no credentials left in temporary files: the Kubernetes provider writes each cluster's kubeconfig
    # to $TMPDIR on every configure and never removes it; the plugin guard's private TMPDIR goes with it
    leftovers = [p.name for p in Path(os.environ["TMPDIR"]).rglob("*") if p.name.startswith("kubeconfig")]
    assert leftovers == []


GPU_WORKLOAD = """\
apiVersion: v1
kind: Pod
metadata: {name: renderer, namespace: default}
spec:
  nodeName: NODE
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: r, image: render, resources: {limits: {nvidia.com/gpu: "1"}}}]
"""


def _kubectl_do(kubeconfig: str, *args: str, stdin: str | None = None) -> None:
    kubectl = binaries.find("kubectl")
    assert kubectl is not None
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", kubeconfig, *args], input=stdin, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def _driver_pod_uids(kubeconfig: str, nodes: list[str]) -> dict[str, str]:
    """node -> uid of its live driver pod, on `nodes` (scaling the pool left a pod bound to the node that
    left, until the pod garbage collector removes it)."""
    pods = _kubectl(kubeconfig, "get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-driver-daemonset")
    return {
        p["spec"]["nodeName"]: p["metadata"]["uid"]
        for p in pods["items"]
        if not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName") in nodes
    }


def _graphics_repairs(home: Path, tmp_path: Path, render: dict[str, Any], nodes: list[str]) -> None:
    """An OnDelete driver update left both RTX workers' driver pods on the old template and one worker's
    device plugin holds stale resources; the other worker was cordoned by its user. With a GPU workload
    running, `verify-graphics --reconcile` refuses and changes nothing; once it is gone, it replaces the
    driver pods one worker at a time, restarts GPU feature discovery then the device plugin, leaves the
    user's cordon in place, keeps a private receipt, and the gate passes."""
    kubeconfig, cluster_id = render["kubeconfig"], render["cluster_id"]
    _kubectl_do(kubeconfig, "cordon", nodes[1])
    npa("local-cloud", "fault", "driver", "--cluster", cluster_id, "--kind", "stale-template", check=True)
    node_fault = ["local-cloud", "fault", "node", "--cluster", cluster_id, "--node", nodes[0]]
    npa(*node_fault, "--kind", "stale-device-plugin", check=True)
    deadline = time.monotonic() + 60
    while True:
        revisions = _kubectl(kubeconfig, "get", "controllerrevisions", "-n", "gpu-operator")["items"]
        updated = any("npa.local/driver-update" in json.dumps(r["data"]) for r in revisions)
        allocatable = _kubectl(kubeconfig, "get", "node", nodes[0])["status"]["allocatable"]
        if updated and allocatable.get("nvidia.com/gpu") == "0":
            break
        assert time.monotonic() < deadline, (updated, allocatable)
        time.sleep(0.5)
    before = _driver_pod_uids(kubeconfig, nodes)
    assert sorted(before) == nodes
    evidence_dir = tmp_path / "graphics-repairs"
    command = ["verify-graphics", "--spec", str(tmp_path / "fleet.yaml"), "--only-clusters", "render"]
    command += ["--reconcile", "--evidence-dir", str(evidence_dir), "--output", "json"]

    _kubectl_do(kubeconfig, "apply", "-f", "-", stdin=GPU_WORKLOAD.replace("NODE", nodes[1]))
    refused = npa(*command, "--timeout-minutes", "0.5")
    assert refused.code == 1, refused.stdout[-3000:]
    assert_publishable(refused, evidence_dir)
    [verdict] = refused.json()["clusters"]
    assert "1 GPU workload(s)" in verdict["error"] and verdict["health"]["failure_categories"] == {
        "repair-refused": 1
    }
    assert _driver_pod_uids(kubeconfig, nodes) == before
    assert _kubectl(kubeconfig, "get", "node", nodes[0])["spec"].get("unschedulable") is None
    receipts_dir = home / ".npa-pulumi" / "repairs" / render["kube_context"]
    [refusal] = sorted(receipts_dir.glob("*-verify-graphics.json"))
    assert stat.S_IMODE(refusal.stat().st_mode) == 0o600
    assert [s["step"] for s in json.loads(refusal.read_text())["steps"]] == ["refused"]

    _kubectl_do(kubeconfig, "delete", "pod", "renderer", "--wait=true")
    repaired = npa(*command, "--timeout-minutes", "3")
    assert repaired.code == 0, repaired.stdout[-3000:] + repaired.stderr[-2000:]
    assert_publishable(repaired, evidence_dir)
    [verdict] = repaired.json()["clusters"]
    assert verdict["status"] == "ready"
    assert verdict["health"]["repairs"]["done"] == {"stale-driver-pod": 1, "stale-resources": 1}
    after = _driver_pod_uids(kubeconfig, nodes)
    assert sorted(after) == nodes and all(after[n] != before[n] for n in nodes)
    assert _kubectl(kubeconfig, "get", "node", nodes[0])["spec"].get("unschedulable") is None
    assert _kubectl(kubeconfig, "get", "node", nodes[1])["spec"]["unschedulable"] is True  # the user's cordon
    assert _kubectl(kubeconfig, "get", "node", nodes[0])["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    receipt = json.loads(sorted(receipts_dir.glob("*-verify-graphics.json"))[-1].read_text())
    steps = [(s["step"], s.get("node") or s.get("daemonset")) for s in receipt["steps"]]
    assert steps == [
        ("cordon", nodes[0]),
        ("delete", nodes[0]),
        ("replaced", nodes[0]),
        ("restored", nodes[0]),
        ("cordon", nodes[1]),  # already cordoned: recorded, left as it was
        ("delete", nodes[1]),
        ("replaced", nodes[1]),
        ("done", None),
        ("restart", "gpu-feature-discovery"),
        ("rolled-out", "gpu-feature-discovery"),
        ("restart", "nvidia-device-plugin-daemonset"),
        ("rolled-out", "nvidia-device-plugin-daemonset"),
        ("done", None),
    ], steps
    assert [s["prior_unschedulable"] for s in receipt["steps"] if s["step"] == "cordon"] == [False, True]

    npa(
        "local-cloud",
        "fault",
        "driver",
        "--cluster",
        cluster_id,
        "--kind",
        "stale-template",
        "--clear",
        check=True,
    )
    npa(*node_fault, "--kind", "stale-device-plugin", "--clear", check=True)
    _kubectl_do(kubeconfig, "uncordon", nodes[1])


@pytest.mark.long
def test_verify_graphics_fails_closed_when_the_driver_drifts(kube_api: Path, tmp_path: Path) -> None:
    """The RTX cluster alone (`make test` covers verify-graphics on a healthy and on a broken worker in the
    journey above): the repository file edited out of band, the driver rendered without its repository
    mounts, and an OnDelete driver update that leaves the old pod: each one fails verify-graphics closed,
    naming the category only, and the stale pod's deletion heals it."""
    npa("local-cloud", "init", check=True)
    spec = write_spec(tmp_path / "fleet.yaml", SPEC.replace("GPU_COUNT", "1").split(RENDER_ONLY_CUT)[0])
    render = _up(spec)["reach.gpu.render"]
    assert render["status"] == "deployed", render
    evidence_dir = tmp_path / "evidence"
    private = ["--evidence-dir", str(evidence_dir)]

    # ---- the fleet's repository file edited out of band: the driver no longer mounts the declared
    # sources, so verify-graphics does not stabilize and fails closed (category only: no file content)
    only_render = ["--spec", str(spec), "--output", "json"]
    edited = json.dumps(
        {"data": {"ubuntu-noble.sources": "deb https://elsewhere.example/ubuntu noble main\n"}}
    )
    _kubectl(render["kubeconfig"], "patch", *REPOSITORIES_CM[1:], "--type", "merge", "-p", edited)
    drifted = npa("verify-graphics", *only_render, *private, "--timeout-minutes", "0.3")
    restored = json.dumps({"data": {"ubuntu-noble.sources": REPOSITORY}})
    _kubectl(render["kubeconfig"], "patch", *REPOSITORIES_CM[1:], "--type", "merge", "-p", restored)
    assert drifted.code == 1, drifted.stdout[-3000:]
    assert_publishable(drifted, evidence_dir)
    assert "elsewhere.example" not in drifted.stdout + drifted.stderr
    [verdict] = drifted.json()["clusters"]
    assert verdict["health"]["failure_categories"].get("driver-repositories"), verdict

    # ---- the operator renders the driver without the repository mounts (`local-cloud fault driver
    # --kind no-repo-mount`): the driver pods roll onto the new template and verify-graphics fails closed
    driver_fault = ["local-cloud", "fault", "driver", "--cluster", render["cluster_id"]]
    npa(*driver_fault, "--kind", "no-repo-mount", check=True)
    unmounted = npa("verify-graphics", *only_render, *private, "--timeout-minutes", "0.3")
    npa(*driver_fault, "--kind", "no-repo-mount", "--clear", check=True)
    assert unmounted.code == 1, unmounted.stdout[-3000:]
    assert_publishable(unmounted, evidence_dir)
    [verdict] = unmounted.json()["clusters"]
    assert verdict["health"]["failure_categories"].get("driver-repositories"), verdict

    # ---- an OnDelete driver update (`local-cloud fault driver --kind stale-template`) leaves the driver
    # pod on the old template: verify-graphics does not stabilize and fails closed (the stale pod is named
    # in the evidence only); deleting it heals it
    npa(*driver_fault, "--kind", "stale-template", check=True)
    deadline = time.monotonic() + 60
    while not any(
        "npa.local/driver-update" in json.dumps(r["data"])
        for r in _kubectl(render["kubeconfig"], "get", "controllerrevisions", "-n", "gpu-operator")["items"]
    ):
        assert time.monotonic() < deadline, "the DaemonSet controller never recorded the updated template"
        time.sleep(0.5)
    stale = npa("verify-graphics", *only_render, *private, "--timeout-minutes", "0.3")
    assert stale.code == 1, stale.stdout[-3000:]
    assert_publishable(stale, evidence_dir)
    [verdict] = stale.json()["clusters"]
    assert verdict["health"]["failure_categories"].get("stale-driver-pod"), verdict
    [receipt] = private_evidence(evidence_dir).values()
    old_pods = [
        p["metadata"]["name"]
        for p in _kubectl(render["kubeconfig"], "get", "pods", "-n", "gpu-operator")["items"]
        if p["metadata"]["name"].startswith("nvidia-driver-daemonset")
    ]
    assert old_pods and all(
        any(p in e for e in receipt["evidence"]["stabilization"]["errors"]) for p in old_pods
    )
    kubectl = str(binaries.find("kubectl"))
    for pod in old_pods:
        subprocess.run(
            [kubectl, "--kubeconfig", render["kubeconfig"], "delete", "pod", "-n", "gpu-operator", pod],
            check=True,
            capture_output=True,
        )
    healed = npa("verify-graphics", *only_render, *private)
    assert healed.code == 0, healed.stdout[-3000:]
    npa(*driver_fault, "--kind", "stale-template", "--clear", check=True)

    npa("local-cloud", "reset", "--yes", check=True)
