"""What the Kubernetes-side local providers compute without a cluster: blocks to API objects and back,
kubectl's document split and ids, Helm's value merging, the API server's token file, and the addons a
release records in the local cloud."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from npa_pulumi.simulator import LocalCloud, LocalSimulator
from npa_pulumi.simulator.kube import controlplane
from npa_pulumi.simulator.projects import iam_token
from npa_pulumi.simulator.tfproviders import helm, kubectl, kubernetes
from npa_pulumi.simulator.tfproviders.base import ProviderError
from npa_pulumi.simulator.tfproviders.kubeapi import parse_duration, server_url

POD_SPEC = {
    "service_account_name": "mig-config-reconciler",
    "restart_policy": "Never",
    "host_pid": True,
    "node_selector": {"nebius.com/node-group-id": "mk8snodegroup-1"},
    "init_container": [
        {
            "name": "clear",
            "image": "registry.k8s.io/kubectl:v1.34.0",
            "args": ["label", "nodes"],
            "env": [{"name": "NODE_SELECTOR", "value": "a=b", "value_from": []}],
            "security_context": [{"run_as_user": "0", "privileged": None}],
        }
    ],
    "container": [{"name": "wait", "image": "img", "command": ["kubectl"], "image_pull_policy": None}],
    "toleration": [],
}


def test_blocks_become_the_api_object() -> None:
    api = kubernetes.to_api(POD_SPEC)
    assert api["serviceAccountName"] == "mig-config-reconciler" and api["hostPID"] is True
    assert api["nodeSelector"] == {"nebius.com/node-group-id": "mk8snodegroup-1"}, "map keys stay as written"
    init = api["initContainers"][0]
    assert init["securityContext"] == {"runAsUser": 0}, "a single block is an object, the string an integer"
    assert init["env"] == [{"name": "NODE_SELECTOR", "value": "a=b"}]
    assert "tolerations" not in api and "imagePullPolicy" not in api["containers"][0]


def test_computed_fields_come_from_the_api_and_import_reads_it_back() -> None:
    planned = {
        "metadata": [{"name": "j", "namespace": None, "uid": None, "labels": None}],
        "spec": [POD_SPEC],
    }
    live = {
        "metadata": {"name": "j", "namespace": "kube-system", "uid": "u-1", "labels": {"x": "y"}},
        "spec": {
            **kubernetes.to_api(POD_SPEC),
            "containers": [{"name": "wait", "imagePullPolicy": "IfNotPresent"}],
        },
    }
    filled = kubernetes.fill(planned, live)
    assert filled["metadata"][0]["namespace"] == "kube-system" and filled["metadata"][0]["uid"] == "u-1"
    assert filled["metadata"][0]["labels"] is None, "labels are not computed at the top: left as planned"
    assert filled["spec"][0]["container"][0]["image_pull_policy"] == "IfNotPresent"
    back = kubernetes.from_api(kubernetes.to_api(POD_SPEC))
    assert back["init_container"][0]["security_context"] == [{"run_as_user": "0"}]
    assert back["host_pid"] is True and back["node_selector"] == POD_SPEC["node_selector"]


def test_kubectl_splits_documents_and_names_them_as_the_provider() -> None:
    content = (
        "# a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: gatekeeper-system\n---\n\n"
    )
    content += (
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: gk\n  namespace: gatekeeper-system\n"
    )
    state = kubectl.FileDocuments().read_data(None, {"content": content})  # type: ignore[arg-type]
    assert len(state["documents"]) == 2
    assert sorted(state["manifests"]) == [
        "/api/v1/namespaces/gatekeeper-system",
        "/apis/apps/v1/namespaces/gatekeeper-system/deployments/gk",
    ]
    twice = content + "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: gatekeeper-system\n"
    with pytest.raises(ProviderError, match="duplicate"):
        kubectl.FileDocuments().read_data(None, {"content": twice})  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as raised:
        kubectl.parse("apiVersion: v1\nkind: ConfigMap\n")
    assert "metadata.name" in raised.value.detail


def test_helm_merges_values_as_helm_does() -> None:
    state = {
        "values": ["a:\n  b: 1\n  c: keep\n", "a:\n  b: 2\n"],
        "set": [
            {"name": "nfd.enabled", "value": "true", "type": None},
            {"name": "driver.version", "value": "580", "type": "string"},
            {"name": "annotations.prometheus\\.io/port", "value": "9127", "type": None},
        ],
        "set_list": [{"name": "hosts", "value": ["h1", "h2"]}],
        "set_sensitive": [{"name": "grafana.adminPassword", "value": "pw", "type": None}],
    }
    values = helm.merged_values(state)
    assert values["a"] == {"b": 2, "c": "keep"}
    assert values["nfd"] == {"enabled": True} and values["driver"] == {"version": "580"}
    assert values["annotations"] == {"prometheus.io/port": 9127}
    assert values["hosts"] == ["h1", "h2"] and values["grafana"]["adminPassword"] == "pw"
    assert helm.merged_values(state, cloak=True)["grafana"]["adminPassword"] == "(sensitive value)"


def test_a_local_chart_names_itself(tmp_path: Path) -> None:
    chart = tmp_path / "nccl-test"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: nccl-test\nversion: 0.2.0\nappVersion: '2.23'\n")
    assert helm.chart_metadata({"chart": str(chart)}) == {
        "name": "nccl-test",
        "version": "0.2.0",
        "appVersion": "2.23",
    }
    remote = helm.chart_metadata({"chart": "gpu-operator", "version": "v25.3.0"})
    assert remote == {"name": "gpu-operator", "version": "v25.3.0", "appVersion": ""}


def test_release_encoding_round_trips() -> None:
    release = {"name": "r", "version": 3, "info": {"status": "deployed"}}
    assert helm.decode_release({"data": {"release": helm.encode_release(release)}}) == release


def test_the_api_server_accepts_the_local_iam_token(tmp_path: Path) -> None:
    path = controlplane.write_tokens(tmp_path, {iam_token("tenant-1"): "local-cloud-user@tenant-1"})
    user = "local-cloud-user@tenant-1"
    assert path.read_text() == f'npa-local-iam-token.tenant-1,{user},{user},"system:masters"\n'

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    found = {
        name: Path(f"/bin/{name}")
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok")
    }
    found["kube-apiserver"] = Path("/bin/true")  # its --version answers nothing: the pinned version is used
    config = json.loads(controlplane.kwokctl_config(found, path))
    patches = {p["name"]: p["extraArgs"] for p in config["componentsPatches"]}
    assert patches["kube-apiserver"] == [{"key": "token-auth-file", "value": str(path)}]


def test_the_local_cloud_hands_out_the_token_its_clusters_accept(tmp_path: Path) -> None:
    cloud = LocalCloud(tmp_path / "cloud")
    assert cloud.access_token().get_secret_value() == iam_token(cloud.principal().tenant_id)


def test_a_release_merges_its_addons_beside_the_others(tmp_path: Path) -> None:
    sim = LocalSimulator(tmp_path / "cloud")
    tenant = sim.principal()["tenant_id"]
    project = sim.list_projects(tenant)[0]["id"]
    cluster_id = sim.create_cluster(project, "c", sim.list_subnets(project)[0]["id"])["id"]
    sim.set_cluster_addons(cluster_id, {"gpu_driver": "operator", "kuberay": "{}"})
    sim.merge_cluster_addons(cluster_id, {"filestore": True})
    addons = sim.cluster_snapshot(cluster_id)[0]["addons"]  # type: ignore[index]
    assert addons["filestore"] is True and addons["gpu_driver"] == "operator" and "kuberay" in addons
    sim.merge_cluster_addons(cluster_id, {"gpu_driver": None})
    assert "gpu_driver" not in sim.cluster_snapshot(cluster_id)[0]["addons"]  # type: ignore[index]


def test_the_provider_host_is_read_as_client_go_reads_it() -> None:
    assert server_url("127.0.0.1:6443") == "https://127.0.0.1:6443"
    assert server_url("https://api.example:443/") == "https://api.example:443"
    with pytest.raises(ProviderError):
        server_url("http://127.0.0.1:8080")
    assert parse_duration("1h30m", 5) == 5400 and parse_duration(None, 60) == 60
    with pytest.raises(ProviderError):
        parse_duration("20 minutes", 1)
