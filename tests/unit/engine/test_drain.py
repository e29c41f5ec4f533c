"""The drain's pure logic (kube/drain.py, engine/teardown/drain.py): which PodDisruptionBudgets block a
whole cluster's drain, which are the four kube-system ones, the snapshot a removed budget is restored
from, eviction's bounded retries, the failure kinds, and a credential plugin that is never interactive."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fake_clock import Clock

from npa_pulumi.engine.teardown.drain import blocking_pdbs, failure_of
from npa_pulumi.kube import drain as kd
from npa_pulumi.kube.client import KubeClient, KubeconfigError, KubeError
from npa_pulumi.output.results import ClusterDrain, DrainFailure, DrainStatus, PdbSnapshot, TeardownPhase

JSON = dict[str, Any]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def node(name: str, *, taints: list[JSON] | None = None, unschedulable: bool = False, **labels: str) -> JSON:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux", **labels}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
    }


def deployment_pods(
    namespace: str, deployment: str, labels: dict[str, str], nodes: list[str], **spec: Any
) -> tuple[list[JSON], JSON]:
    """Pods of a Deployment (through its ReplicaSet, as the controllers make them) and that ReplicaSet."""
    replicaset = f"{deployment}-5d4f8"
    pods = [
        {
            "metadata": {
                "name": f"{replicaset}-{i}",
                "namespace": namespace,
                "uid": f"uid-{deployment}-{i}",
                "labels": labels,
                "ownerReferences": [{"kind": "ReplicaSet", "name": replicaset, "controller": True}],
            },
            "spec": {"nodeName": where, **spec},
            "status": {"phase": "Running"},
        }
        for i, where in enumerate(nodes)
    ]
    rs = {
        "metadata": {
            "name": replicaset,
            "namespace": namespace,
            "ownerReferences": [{"kind": "Deployment", "name": deployment, "controller": True}],
        }
    }
    return pods, rs


def budget(namespace: str, name: str, labels: dict[str, str], allowed: int, observed: int = 1) -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-pdb-{name}",
            "resourceVersion": "812",
            "generation": 1,
            "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
            "annotations": {"note": "kept"},
            "managedFields": [{"manager": "x"}],
            "creationTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {"selector": {"matchLabels": labels}, "minAvailable": 1},
        "status": {"disruptionsAllowed": allowed, "observedGeneration": observed, "currentHealthy": 2},
    }


DNS = {"k8s-app": "kube-dns"}
APP = {"app": "trainer"}


def one_cpu_node_cluster(dns_allowed: int = 1, app_allowed: int = 0) -> kd.Inventory:
    """The one-CPU-node-pool case: CoreDNS (two replicas) and a user's app on the CPU node, a GPU node the
    system pods do not tolerate."""
    dns_pods, dns_rs = deployment_pods("kube-system", "coredns", DNS, ["cpu-0", "cpu-0"])
    app_pods, app_rs = deployment_pods("team", "trainer", APP, ["cpu-0"])
    return kd.Inventory(
        nodes=[node("cpu-0"), node("gpu-0", taints=[GPU_TAINT])],
        pods=[*dns_pods, *app_pods],
        replicasets=[dns_rs, app_rs],
        pdbs=[
            budget("kube-system", "coredns", DNS, dns_allowed),
            budget("team", "trainer", APP, app_allowed),
        ],
    )


# --------------------------------------------------------------------------------- selectors


def test_a_label_selector_as_the_api_reads_it() -> None:
    labels = {"app": "a", "tier": "web"}
    assert kd.selects({}, labels)  # empty: everything (policy/v1)
    assert not kd.selects(None, labels)  # null: nothing
    assert kd.selects({"matchLabels": {"app": "a"}}, labels)
    assert not kd.selects({"matchLabels": {"app": "b"}}, labels)
    expressions = [
        ({"key": "tier", "operator": "In", "values": ["web", "api"]}, True),
        ({"key": "tier", "operator": "NotIn", "values": ["web"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["x"]}, True),
        ({"key": "app", "operator": "Exists"}, True),
        ({"key": "app", "operator": "DoesNotExist"}, False),
    ]
    for expression, holds in expressions:
        assert kd.selects({"matchExpressions": [expression]}, labels) is holds, expression


# --------------------------------------------------------------------------------- which budgets block


def test_coredns_on_the_only_cpu_node_blocks_a_whole_cluster_drain_and_so_does_a_user_budget() -> None:
    inventory = one_cpu_node_cluster()
    everything = {"cpu-0", "gpu-0"}
    found = {b.ref: b for b in kd.blockers(inventory, everything)}
    assert set(found) == {"kube-system/coredns", "team/trainer"}
    dns = found["kube-system/coredns"]
    assert dns.system and dns.allowed == 1
    assert dns.pods == ("kube-system/coredns-5d4f8-0 (cpu-0)", "kube-system/coredns-5d4f8-1 (cpu-0)")
    assert not found["team/trainer"].system
    assert "every node of the cluster goes" in dns.why(whole_cluster=True)


def test_a_budget_that_allows_every_pod_it_protects_does_not_block() -> None:
    inventory = one_cpu_node_cluster(dns_allowed=2, app_allowed=1)
    assert kd.blockers(inventory, {"cpu-0", "gpu-0"}) == []


def test_a_node_that_stays_and_takes_a_replacement_unblocks_it_a_tainted_or_cordoned_one_does_not() -> None:
    inventory = one_cpu_node_cluster()
    # Draining only the CPU node: the GPU node stays, but its taint is not tolerated.
    assert {b.ref for b in kd.blockers(inventory, {"cpu-0"})} == {"kube-system/coredns", "team/trainer"}
    inventory.nodes.append(node("cpu-1", unschedulable=True))
    assert {b.ref for b in kd.blockers(inventory, {"cpu-0"})} == {"kube-system/coredns", "team/trainer"}
    inventory.nodes.append(node("cpu-2"))
    assert kd.blockers(inventory, {"cpu-0"}) == []


def test_placement_reads_node_selectors_required_affinity_and_tolerations() -> None:
    pod = {"spec": {"nodeSelector": {"pool": "cpu"}, "tolerations": []}}
    assert kd.placeable(pod, node("n", pool="cpu"))
    assert not kd.placeable(pod, node("n", pool="gpu"))
    assert not kd.placeable(pod, node("n", pool="cpu", taints=[GPU_TAINT]))
    tolerant = {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    assert kd.placeable(tolerant, node("n", taints=[GPU_TAINT]))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}
                ]
            }
        }
    }
    picky = {"spec": {"affinity": affinity}}
    assert kd.placeable(picky, node("n", gen="4"))
    assert not kd.placeable(picky, node("n", gen="2"))


def test_a_budget_not_yet_observed_allows_nothing() -> None:
    assert kd.disruptions_allowed(budget("ns", "b", APP, 3, observed=1)) == 3
    stale = budget("ns", "b", APP, 3, observed=1)
    stale["metadata"]["generation"] = 2
    assert kd.disruptions_allowed(stale) == 0


def test_what_a_drain_evicts() -> None:
    [pod], _ = deployment_pods("team", "trainer", APP, ["cpu-0"])
    assert kd.evictable(pod)
    daemon = {
        **pod,
        "metadata": {**pod["metadata"], "ownerReferences": [{"kind": "DaemonSet", "controller": True}]},
    }
    mirror = {**pod, "metadata": {**pod["metadata"], "annotations": {kd.MIRROR_ANNOTATION: "x"}}}
    going = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-12-01T00:00:00Z"}}
    done = {**pod, "status": {"phase": "Succeeded"}}
    unscheduled = {**pod, "spec": {}}
    for other in (daemon, mirror, going, done, unscheduled):
        assert not kd.evictable(other)


# --------------------------------------------------------------------------------- the four system budgets


@pytest.mark.parametrize("name", sorted(kd.SYSTEM_PDBS))
def test_the_four_system_budgets_are_known_by_namespace_name_and_what_they_protect(name: str) -> None:
    labels = {"k8s-app": name}
    pods, rs = deployment_pods("kube-system", kd.SYSTEM_PDBS[name], labels, ["cpu-0"])
    pdb = budget("kube-system", name, labels, 0)
    inventory = kd.Inventory(nodes=[node("cpu-0")], pods=pods, replicasets=[rs], pdbs=[pdb])
    assert kd.is_system_pdb(pdb, inventory)
    # The same budget in another namespace is a user's.
    moved = budget("team", name, labels, 0)
    user_pods, user_rs = deployment_pods("team", kd.SYSTEM_PDBS[name], labels, ["cpu-0"])
    assert not kd.is_system_pdb(moved, kd.Inventory(pods=user_pods, replicasets=[user_rs], pdbs=[moved]))


def test_a_kube_system_budget_with_a_system_name_that_selects_other_pods_is_not_a_system_one() -> None:
    pods, rs = deployment_pods("kube-system", "my-dns-cache", DNS, ["cpu-0"])
    pdb = budget("kube-system", "coredns", DNS, 0)
    assert not kd.is_system_pdb(pdb, kd.Inventory(pods=pods, replicasets=[rs], pdbs=[pdb]))
    bare = [{**pods[0], "metadata": {**pods[0]["metadata"], "ownerReferences": []}}]
    assert not kd.is_system_pdb(pdb, kd.Inventory(pods=bare, pdbs=[pdb]))
    # Any other name in kube-system is never one of the four.
    other = budget("kube-system", "konnectivity-agent", DNS, 0)
    dns_pods, dns_rs = deployment_pods("kube-system", "coredns", DNS, ["cpu-0"])
    assert not kd.is_system_pdb(other, kd.Inventory(pods=dns_pods, replicasets=[dns_rs], pdbs=[other]))


def test_the_phase_report_makes_only_a_system_budget_relaxable() -> None:
    found = {f"{b.namespace}/{b.name}": b for b in blocking_pdbs(one_cpu_node_cluster(), may_relax=True)}
    assert found["kube-system/coredns"].relaxable and found["kube-system/coredns"].system
    assert "restored if the destroy aborts" in found["kube-system/coredns"].why
    user = found["team/trainer"]
    assert not user.relaxable and not user.system and "never relaxed" in user.why
    assert user.pods == ["team/trainer-5d4f8-0 (cpu-0)"] and user.disruptions_allowed == 0
    held = {f"{b.namespace}/{b.name}": b for b in blocking_pdbs(one_cpu_node_cluster(), may_relax=False)}
    assert not held["kube-system/coredns"].relaxable


# --------------------------------------------------------------------------------- the restore snapshot


def test_a_snapshot_keeps_what_restores_the_budget_and_nothing_the_server_assigns() -> None:
    pdb = budget("kube-system", "coredns", DNS, 0)
    saved = kd.snapshot(pdb)
    assert saved == {
        "namespace": "kube-system",
        "name": "coredns",
        "uid": "uid-pdb-coredns",
        "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
        "annotations": {"note": "kept"},
        "spec": {"selector": {"matchLabels": DNS}, "minAvailable": 1},
    }
    obj = kd.restorable(saved)
    assert obj["apiVersion"] == "policy/v1" and obj["kind"] == "PodDisruptionBudget"
    assert obj["metadata"] == {
        "name": "coredns",
        "namespace": "kube-system",
        "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
        "annotations": {"note": "kept"},
    }
    assert obj["spec"] == pdb["spec"]
    # What the receipt holds reads back into the same snapshot.
    assert kd.restorable(PdbSnapshot(**saved).model_dump(exclude={"restored"})) == obj


class FakeApi:
    """The few calls eviction and restore make, with scripted answers (a unit test of the loops only: the
    integration test runs them against a real API server)."""

    def __init__(self, refusals: dict[str, int] | None = None, fail: int = 0) -> None:
        self.refusals = dict(refusals or {})
        self.fail = fail
        self.evictions: list[str] = []
        self.created: list[JSON] = []
        self.existing: dict[str, JSON] = {}

    def evict(self, namespace: str, name: str, uid: str = "") -> bool:
        self.evictions.append(f"{namespace}/{name}")
        if self.fail:
            raise KubeError("forbidden", self.fail)
        if self.refusals.get(name, 0) > 0:
            self.refusals[name] -= 1
            raise KubeError("Cannot evict pod as it would violate the pod's disruption budget.", 429)
        return True

    def create(self, collection: str, obj: JSON) -> JSON:
        key = obj["metadata"]["name"]
        if key in self.existing:
            raise KubeError("already exists", 409)
        self.created.append(obj)
        return obj

    def get_or_none(self, path: str) -> JSON | None:
        return self.existing.get(path.rsplit("/", 1)[-1])


def _pods(*names: str) -> list[JSON]:
    return [{"metadata": {"namespace": "ns", "name": n, "uid": f"u-{n}"}} for n in names]


def test_eviction_retries_a_refusal_within_its_bound_then_reports_it() -> None:
    api, clock = FakeApi({"slow": 2, "held": 100}), Clock()
    pods = _pods("free", "slow", "held")
    result = kd.evict_pods(api, pods, retry_s=5, poll_s=1, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert [kd.ref(p) for p in result.evicted] == ["ns/free", "ns/slow"]
    assert list(result.refused) == ["ns/held"] and "disruption budget" in result.refused["ns/held"]
    assert clock.now == 5  # bounded: asked again once a second for five seconds, then left refused
    assert api.evictions.count("ns/free") == 1
    # A refusal no replacement can rescue (its budget blocks) is final: not asked again, no wait.
    api, clock = FakeApi({"held": 100}), Clock()
    held = kd.evict_pods(
        api,  # type: ignore[arg-type]
        _pods("held"),
        retry_s=5,
        clock=clock,
        sleep=clock.sleep,
        final=lambda pod: pod["metadata"]["name"] == "held",
    )
    assert list(held.refused) == ["ns/held"] and api.evictions == ["ns/held"] and clock.now == 0


def test_an_eviction_error_that_is_not_a_budget_refusal_is_raised_with_its_status() -> None:
    with pytest.raises(KubeError) as raised:
        kd.evict_pods(FakeApi(fail=403), _pods("p"), retry_s=5)  # type: ignore[arg-type]
    assert failure_of(raised.value) is DrainFailure.RBAC


def test_restore_creates_from_the_snapshot_and_leaves_a_budget_someone_made_again_differently() -> None:
    saved = kd.snapshot(budget("kube-system", "coredns", DNS, 0))
    api = FakeApi()
    assert kd.restore_pdb(api, saved) == "restored"  # type: ignore[arg-type]
    assert api.created == [kd.restorable(saved)]
    same = FakeApi()
    same.existing["coredns"] = {"spec": saved["spec"]}
    assert kd.restore_pdb(same, saved) == "present"  # type: ignore[arg-type]
    other = FakeApi()
    other.existing["coredns"] = {"spec": {"maxUnavailable": 3}}
    with pytest.raises(KubeError, match="another spec"):
        kd.restore_pdb(other, saved)  # type: ignore[arg-type]
    assert other.created == []


# --------------------------------------------------------------------------------- failure kinds


def test_failure_kinds_are_told_apart() -> None:
    assert failure_of(KubeconfigError("the kubeconfig has no context 'x'")) is DrainFailure.KUBECONFIG
    assert failure_of(OSError("unreadable")) is DrainFailure.KUBECONFIG
    assert failure_of(KubeError("Unauthorized", 401)) is DrainFailure.AUTHENTICATION
    assert failure_of(KubeError("forbidden", 403)) is DrainFailure.RBAC
    assert failure_of(KubeError("unreachable", 0)) is DrainFailure.API
    assert failure_of(KubeError("etcd timeout", 500)) is DrainFailure.API


def _kubeconfig(user: JSON, server: str = "https://127.0.0.1:6443") -> str:
    return json.dumps(
        {
            "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "ctx",
        }
    )


def test_an_unusable_kubeconfig_is_a_kubeconfig_error_not_an_api_one() -> None:
    for text in ("- not a mapping", "{unclosed", json.dumps({"contexts": [{"name": "ctx"}]})):
        with pytest.raises(KubeconfigError):
            KubeClient.from_kubeconfig(text, "ctx")
    with pytest.raises(KubeconfigError, match="no context"):
        KubeClient.from_kubeconfig(_kubeconfig({"token": "t"}), "other")
    with pytest.raises(KubeconfigError, match="not installed"):
        KubeClient.from_kubeconfig(_kubeconfig({"exec": {"command": "no-such-plugin-npa"}}), "ctx")
    with pytest.raises(KubeconfigError, match="unsupported API server"):
        KubeClient.from_kubeconfig(_kubeconfig({"token": "t"}, server="http://plain:80"), "ctx")


def test_a_credential_plugin_runs_without_a_terminal_and_is_told_it_is_not_interactive(
    tmp_path: Path,
) -> None:
    seen = tmp_path / "seen.json"
    plugin = tmp_path / "plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        f'stdin=$(cat); printf \'{{"info": %s, "stdin": "%s"}}\' "$KUBERNETES_EXEC_INFO" "$stdin" > {seen}\n'
        'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
        '"status": {"token": "tok"}}\'\n'
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    client = KubeClient.from_kubeconfig(_kubeconfig({"exec": {"command": str(plugin), "args": []}}), "ctx")
    assert client.server == "https://127.0.0.1:6443"
    told = json.loads(seen.read_text())
    assert told["info"]["spec"] == {"interactive": False} and told["stdin"] == ""
    # A plugin that fails (a login it could not do without a person) is an authentication failure.
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(KubeError) as raised:
        KubeClient.from_kubeconfig(_kubeconfig({"exec": {"command": str(failing)}}), "ctx")
    assert failure_of(raised.value) is DrainFailure.AUTHENTICATION
    assert os.environ.get("KUBERNETES_EXEC_INFO") is None  # the caller's environment is untouched


# --------------------------------------------------------------------------------- the phase's record


def test_a_phase_without_a_drain_says_nothing_of_it_and_one_with_a_drain_reads_back() -> None:
    phase = TeardownPhase(phase="network", project_key="p", stack="f.p")
    assert "drain" not in phase.to_json()
    drain = ClusterDrain(
        status=DrainStatus.FAILED,
        failure=DrainFailure.RBAC,
        relaxed=[PdbSnapshot(**kd.snapshot(budget("kube-system", "coredns", DNS, 0)))],
    )
    cluster = TeardownPhase(phase="cluster", project_key="p", stack="f.p.c", drain=drain)
    document = json.loads(json.dumps(cluster.to_json()))
    assert document["drain"]["failure"] == "rbac" and document["drain"]["relaxed"][0]["name"] == "coredns"
    known = set(TeardownPhase.model_fields)
    again = TeardownPhase(**{k: v for k, v in document.items() if k in known})
    assert again.drain == drain


def _receipt_with(home: Path, name: str, cluster_id: str, drain: JSON) -> None:
    path = home / "teardown-receipts" / "f" / f"{name}-destroy.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    phase = {"phase": "cluster", "stack": "f.p.c", "deletes": {"cluster_id": cluster_id}, "drain": drain}
    path.write_text(json.dumps({"phases": [phase]}))


def test_an_earlier_killed_destroys_removed_budgets_are_found_in_its_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npa_pulumi.engine.teardown.receipts import unrestored_relaxation

    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))
    saved = {**kd.snapshot(budget("kube-system", "coredns", DNS, 0)), "restored": False}
    assert unrestored_relaxation("f", "f.p.c", "c1") is None
    _receipt_with(
        tmp_path,
        "20261201T000000Z-1",
        "c1",
        {"status": "drained", "relaxation": "relaxed", "relaxed": [saved]},
    )
    assert unrestored_relaxation("f", "f.p.c", "c1") == ("20261201T000000Z-1-destroy", [saved])
    assert unrestored_relaxation("f", "f.p.c", "another-cluster") is None
    # A later run that is only running now (its phase still holds the preview) does not hide it ...
    _receipt_with(tmp_path, "20261201T000100Z-2", "c1", {"status": "previewed", "relaxation": "not-needed"})
    assert unrestored_relaxation("f", "f.p.c", "c1") is not None
    # ... a later run that put them back (or saw them go with the cluster) does.
    _receipt_with(tmp_path, "20261201T000200Z-3", "c1", {"status": "drained", "relaxation": "restored"})
    assert unrestored_relaxation("f", "f.p.c", "c1") is None
