"""Drain-aware cluster teardown (issue 45 item 1), end to end on the local cloud: real CLI processes, the
real Pulumi engine, terraform, and a real kube-apiserver, controller manager (its disruption controller)
and scheduler behind the cluster, with kwok nodes.

One small fleet is deployed once for the module: one cluster whose only node is one CPU node. Like every
local cluster it runs the managed cluster's system workloads in kube-system (cilium-operator, CoreDNS, the
CoreDNS autoscaler, metrics-server) under their PodDisruptionBudgets; the test adds a user's Deployment
under a budget of its own that allows no disruption. In order:

* `destroy --dry-run` lists what would block the drain (CoreDNS's budget with its pods on the CPU node, the
  user's budget), by namespace and name, and changes nothing; a saved kubeconfig that cannot be used,
  credentials the API server refuses, an identity RBAC grants nothing and an API server that stops
  answering are reported as `kubeconfig`, `authentication`, `rbac` and `api` failures;
* a destroy made to abort (the local cloud's fault on `delete_node_group`: the Terraform destroy fails
  while the cluster exists) restores the four kube-system budgets it removed, from the snapshots its
  receipt holds, and makes the node schedulable again; the user's budget and its pod are never touched;
* `destroy --yes` then completes: the system budgets relaxed again and gone with the cluster, the user's
  pod held by its budget to the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet_helpers import by_stack, inventory, npa, write_spec

from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.drain import SYSTEM_PDBS

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: drn
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: one
"""
STACK = "drn.project-existing1.one"
PHASE = f"cluster:{STACK}"
PDBS = "/apis/policy/v1/poddisruptionbudgets"
USER_NS = "team"


@dataclass
class Fleet:
    home: Path
    spec: Path
    kubeconfig: Path
    context: str
    cluster_id: str

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig.read_text(), self.context)

    def budgets(self) -> dict[str, dict[str, Any]]:
        return {f"{b['metadata']['namespace']}/{b['metadata']['name']}": b for b in self.client().list(PDBS)}

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        items = self.client().list(f"/api/v1/namespaces/{namespace}/pods")
        return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def _wait(what: str, check: Any, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s:g}s"
        time.sleep(0.5)


def _settled(fleet: Fleet) -> bool:
    """Every budget observed by the disruption controller, CoreDNS's two pods Running on the node."""
    budgets = fleet.budgets()
    observed = all(
        (b.get("status") or {}).get("observedGeneration") == b["metadata"]["generation"]
        for b in budgets.values()
    )
    dns = [
        p for p in fleet.pods("kube-system").values() if p["metadata"]["labels"].get("k8s-app") == "kube-dns"
    ]
    running = len(dns) == 2 and all(p["status"].get("phase") == "Running" for p in dns)
    wanted = {f"kube-system/{n}" for n in SYSTEM_PDBS} | {f"{USER_NS}/trainer"}
    return observed and running and wanted <= set(budgets)


def _user_workload(client: KubeClient) -> None:
    """A user's training job: one pod under a budget that allows no disruption."""
    labels = {"app": "trainer"}
    client.apply(
        f"/api/v1/namespaces/{USER_NS}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USER_NS}},
        "test",
    )
    client.apply(
        f"/apis/apps/v1/namespaces/{USER_NS}/deployments/trainer",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "trainer", "namespace": USER_NS},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "train", "image": "example.com/train:1"}]},
                },
            },
        },
        "test",
    )
    client.apply(
        f"/apis/policy/v1/namespaces/{USER_NS}/poddisruptionbudgets/trainer",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "trainer", "namespace": USER_NS},
            "spec": {"selector": {"matchLabels": labels}, "maxUnavailable": 0},
        },
        "test",
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("drain")
    home = root / "home"
    home.mkdir()
    (root / "terraformrc").write_text("")
    private_tmp = root / "tmp"
    private_tmp.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "HOME": str(home),
            "NPA_PULUMI_HOME": str(home / ".npa-pulumi"),
            "NPA_LOCAL_CLOUD_DIR": str(home / ".npa-pulumi" / "local-cloud"),
            "PULUMI_HOME": str(home / ".pulumi"),
            "TF_CLI_CONFIG_FILE": str(root / "terraformrc"),
            "CHECKPOINT_DISABLE": "1",
            "NPA_LOCAL_CLOUD_KUBERNETES_API": "1",
            "TMPDIR": str(private_tmp),
        }.items():
            patch.setenv(name, value)
        for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
            patch.delenv(name, raising=False)
        patch.delenv("NEBIUS_IAM_TOKEN", raising=False)
        patch.delenv("NPA_CONFIG_DIR", raising=False)
        try:
            npa("local-cloud", "init", check=True)
            spec = write_spec(root / "fleet.yaml", SPEC)
            up = npa("up", "--spec", str(spec), "--cloud", "local", "--yes", "--output", "json")
            assert up.code == 0, up.stderr[-4000:] + up.stdout[-2000:]
            stack = by_stack(up.json())[STACK]
            found = Fleet(home, spec, Path(stack["kubeconfig"]), stack["kube_context"], stack["cluster_id"])
            _user_workload(found.client())
            _wait("the system workloads and the user's job settled", lambda: _settled(found), 120)
            yield found
        finally:
            from npa_pulumi.simulator import seaweedd
            from npa_pulumi.simulator.kube import lifecycle

            lifecycle.stop_all(home / ".npa-pulumi" / "local-cloud")
            seaweedd.stop(home / ".npa-pulumi" / "local-cloud")


def _phase(document: dict[str, Any]) -> dict[str, Any]:
    phase: dict[str, Any] = next(p for p in document["phases"] if p["name"] == PHASE)
    return phase


def _state(fleet: Fleet) -> dict[str, Any]:
    """What a dry run must not change: budgets (uid, spec), pods (uid), nodes' scheduling."""
    client = fleet.client()
    return {
        "budgets": {k: (b["metadata"]["uid"], b["spec"]) for k, b in fleet.budgets().items()},
        "pods": sorted(p["metadata"]["uid"] for p in client.list("/api/v1/pods")),
        "cordoned": [
            n["metadata"]["name"] for n in client.list("/api/v1/nodes") if n["spec"].get("unschedulable")
        ],
    }


def test_the_dry_run_lists_what_blocks_the_drain_and_changes_nothing(fleet: Fleet) -> None:
    before = _state(fleet)
    [node] = [n["metadata"]["name"] for n in fleet.client().list("/api/v1/nodes")]
    dry = npa("destroy", "--spec", str(fleet.spec), "--dry-run", "--output", "json", input_text="")
    assert dry.code == 0, dry.stderr[-3000:]
    drain = _phase(dry.json())["drain"]
    assert drain["status"] == "previewed" and drain["failure"] is None, drain
    assert drain["context"] == fleet.context and drain["nodes"] == 1
    blocking = {f"{b['namespace']}/{b['name']}": b for b in drain["blocking"]}
    dns = blocking["kube-system/coredns"]
    assert dns["system"] and dns["relaxable"] and dns["disruptions_allowed"] == 1
    assert len(dns["pods"]) == 2 and all(p.endswith(f"({node})") for p in dns["pods"])
    assert "every node of the cluster goes" in dns["why"]
    user = blocking[f"{USER_NS}/trainer"]
    assert not user["system"] and not user["relaxable"] and user["disruptions_allowed"] == 0
    assert "never relaxed" in user["why"]
    # Every blocking budget in kube-system is one of the four, and known as such.
    assert {k for k, b in blocking.items() if b["system"]} <= {f"kube-system/{n}" for n in SYSTEM_PDBS}
    assert _state(fleet) == before

    text = npa("destroy", "--spec", str(fleet.spec), "--dry-run", input_text="", env={"COLUMNS": "300"})
    assert text.code == 0, text.stderr[-2000:]
    assert "would block: PodDisruptionBudget kube-system/coredns [system, relaxable]" in text.stdout
    assert f"would block: PodDisruptionBudget {USER_NS}/trainer [user, never relaxed]" in text.stdout
    assert _state(fleet) == before


def _token_of_a_service_account_without_rights(fleet: Fleet) -> str:
    """Credentials the API server accepts for an identity RBAC grants nothing (a fresh ServiceAccount's
    token, from the TokenRequest API)."""
    client = fleet.client()
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "nobody", "namespace": "default"},
    }
    client.apply("/api/v1/namespaces/default/serviceaccounts/nobody", account, "test")
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600},
    }
    answer = client.request("POST", "/api/v1/namespaces/default/serviceaccounts/nobody/token", request)
    token: str = answer["status"]["token"]
    return token


def _dry_drain(fleet: Fleet) -> dict[str, Any]:
    dry = npa("destroy", "--spec", str(fleet.spec), "--dry-run", "--output", "json", input_text="")
    assert dry.code == 0, dry.stderr[-3000:]
    drain: dict[str, Any] = _phase(dry.json())["drain"]
    return drain


def test_kubeconfig_authentication_rbac_and_api_failures_are_told_apart(fleet: Fleet) -> None:
    original = fleet.kubeconfig.read_text()
    refused, unauthorized = yaml.safe_load(original), yaml.safe_load(original)
    refused["users"][0]["user"] = {"token": "not-a-token-the-api-server-knows"}
    unauthorized["users"][0]["user"] = {"token": _token_of_a_service_account_without_rights(fleet)}
    cases = {
        "kubeconfig": "{not yaml: [",
        "authentication": json.dumps(refused),
        "rbac": json.dumps(unauthorized),
    }
    try:
        for kind, text in cases.items():
            fleet.kubeconfig.write_text(text)
            drain = _dry_drain(fleet)
            assert drain["status"] == "skipped" and drain["failure"] == kind, drain
            assert "not-a-token" not in json.dumps(drain)  # never a credential in the output
    finally:
        fleet.kubeconfig.write_text(original)
    # The API server stops answering (the local cloud pauses it): an API failure, after a bounded wait.
    unreachable = ["local-cloud", "fault", "api", "--cluster", fleet.cluster_id, "--kind", "unreachable"]
    npa(*unreachable, check=True)
    try:
        drain = _dry_drain(fleet)
    finally:
        npa(*unreachable, "--clear", check=True)
    assert drain["status"] == "skipped" and drain["failure"] == "api", drain
    assert drain["blocking"] == []
    assert _dry_drain(fleet)["status"] == "previewed"
    # The control plane outlived the pause: its controller manager still reconciles (a Deployment gets its
    # ReplicaSet), as the rest of the module needs.
    client = fleet.client()
    probe = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {
                "metadata": {"labels": {"app": "probe"}},
                "spec": {"containers": [{"name": "p", "image": "p"}]},
            },
        },
    }
    client.apply("/apis/apps/v1/namespaces/default/deployments/probe", probe, "test")
    _wait(
        "the controller manager",
        lambda: client.list("/apis/apps/v1/namespaces/default/replicasets", "app=probe"),
    )
    client.delete("/apis/apps/v1/namespaces/default/deployments/probe")


def test_a_disruptive_up_waits_for_the_running_job_and_halts_naming_it(fleet: Fleet) -> None:
    """Issue 58: before a disruptive change `up` waits for the job pods of `maintenance.wait_for_jobs`; the
    user's trainer pod runs on, so at the timeout the cluster is not changed and the pod is named."""
    before, groups = _state(fleet), inventory()["node_groups"]
    wait = "  maintenance:\n    wait_for_jobs: {selectors: [app=trainer], timeout: 3s}\n"
    waiting = SPEC.replace("preset: 4vcpu-16gb}", "preset: 8vcpu-32gb}").replace(
        "projects:\n", wait + "projects:\n"
    )
    write_spec(fleet.spec, waiting)
    try:
        up = npa("up", "--spec", str(fleet.spec), "--yes", "--no-preflight", "--output", "json")
    finally:
        write_spec(fleet.spec, SPEC)
    assert up.code == 1, up.stderr[-3000:] + up.stdout[-2000:]
    cluster = by_stack(up.json())[STACK]
    assert cluster["status"] == "failed"
    [pod] = fleet.pods(USER_NS)
    assert f"{USER_NS}/{pod}" in cluster["error"] and "nothing was evicted" in cluster["error"]
    assert "job pod(s) still running after waiting 3s before a disruptive change" in cluster["error"]
    # Not changed: the same node groups in the cloud, the same budgets, pods and (uncordoned) node.
    assert inventory()["node_groups"] == groups
    assert _state(fleet) == before


def test_an_aborted_destroy_restores_the_system_budgets_and_never_touches_the_users(fleet: Fleet) -> None:
    before = fleet.budgets()
    user_pod = _wait("the user's pod", lambda: fleet.pods(USER_NS))
    npa(
        "local-cloud",
        "fault",
        "add",
        "--op",
        "delete_node_group",
        "--error",
        "unavailable",
        "--forever",
        check=True,
    )
    try:
        aborted = npa("destroy", "--spec", str(fleet.spec), "--yes", "--output", "json")
    finally:
        npa("local-cloud", "fault", "clear", check=True)
    assert aborted.code == 2, aborted.stderr[-4000:]  # the cluster is left: a partial cleanup
    document = aborted.json()
    phase = _phase(document)
    assert phase["status"] == "failed"
    drain = phase["drain"]
    assert drain["status"] == "incomplete" and drain["failure"] is None, drain
    relaxed = {s["name"]: s for s in drain["relaxed"]}
    assert "coredns" in relaxed and set(relaxed) <= set(SYSTEM_PDBS), relaxed
    assert drain["relaxation"] == "restored" and all(s["restored"] for s in relaxed.values())
    assert drain["cordoned"] == drain["uncordoned"] and len(drain["cordoned"]) == 1
    assert any(
        r.startswith(f"{USER_NS}/trainer-") and f"{USER_NS}/trainer (user" in r for r in drain["refused"]
    )
    assert any("drain incomplete" in w for w in document["warnings"])
    # The receipt holds the snapshots the budgets were put back from.
    receipt = json.loads(Path(document["receipt"]).read_text())
    saved = {s["name"]: s for s in _phase(receipt)["drain"]["relaxed"]}
    assert saved["coredns"]["spec"] == before["kube-system/coredns"]["spec"]
    assert saved["coredns"]["uid"] == before["kube-system/coredns"]["metadata"]["uid"]

    # In the cluster: every removed system budget is back with its spec (a new object), the others and
    # the user's budget are the very objects they were, the user's pod was never evicted, the node is
    # schedulable again.
    after = fleet.budgets()
    assert set(after) == set(before)
    for key, budget in before.items():
        assert after[key]["spec"] == budget["spec"], key
        replaced = after[key]["metadata"]["uid"] != budget["metadata"]["uid"]
        assert replaced == (key.split("/", 1)[1] in relaxed and key.startswith("kube-system/")), key
    assert after[f"{USER_NS}/trainer"]["metadata"]["uid"] == before[f"{USER_NS}/trainer"]["metadata"]["uid"]
    assert set(fleet.pods(USER_NS)) == set(user_pod)
    assert [
        n["metadata"]["name"] for n in fleet.client().list("/api/v1/nodes") if n["spec"].get("unschedulable")
    ] == []
    assert fleet.cluster_id in {c["id"] for c in inventory()["mk8s_clusters"]}
    _wait("CoreDNS back on its node", lambda: _settled(fleet), 120)


def test_destroy_completes_and_the_users_budget_holds_to_the_end(fleet: Fleet) -> None:
    user_budget = fleet.budgets()[f"{USER_NS}/trainer"]["metadata"]["uid"]
    done = npa("destroy", "--spec", str(fleet.spec), "--yes", "--output", "json")
    assert done.code == 0, done.stderr[-4000:] + done.stdout[-2000:]
    phase = _phase(done.json())
    assert phase["status"] == "done"
    drain = phase["drain"]
    assert drain["relaxation"] == "gone-with-cluster" and "coredns" in {s["name"] for s in drain["relaxed"]}
    assert any(f"{USER_NS}/trainer (user" in r for r in drain["refused"])
    assert not any(e.startswith(f"{USER_NS}/") for e in drain["evicted"])
    assert fleet.cluster_id not in {c["id"] for c in inventory()["mk8s_clusters"]}
    assert not fleet.kubeconfig.exists()
    receipt = json.loads(Path(done.json()["receipt"]).read_text())
    assert receipt["outcome"] == "ok"
    # The user's budget was never snapshotted (so never removed or restored) by any run of the module.
    receipts = sorted((fleet.home / ".npa-pulumi" / "teardown-receipts" / "drn").glob("*.json"))
    assert len(receipts) == 2
    for path in receipts:
        assert user_budget not in path.read_text()
        relaxed = _phase(json.loads(path.read_text()))["drain"]["relaxed"]
        assert relaxed and {s["namespace"] for s in relaxed} == {"kube-system"}
