"""The nebius provider's handlers (npa_pulumi/simulator/tfproviders) called as the worker calls them,
against a temporary local cloud without API servers; and the worker loop on its JSON-lines wire."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from upstream_library import upstream_library

from npa_pulumi.kube.gpu_operator import REVISION_VALUE_KEY
from npa_pulumi.simulator import LocalSimulator
from npa_pulumi.simulator.tfproviders import nebius
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError
from npa_pulumi.simulator.tfproviders.registry import PROVIDERS
from npa_pulumi.simulator.tfproviders.worker import serve

TIGHT = Path(__file__).resolve().parents[2] / "fixtures" / "local_cloud" / "tight-tenant.yaml"
PROJECT = "project-existing1"
GIB = 1 << 30


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalSimulator:
    directory = tmp_path / "cloud"
    monkeypatch.setenv("NPA_LOCAL_CLOUD_DIR", str(directory))
    monkeypatch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "0")
    simulator = LocalSimulator(directory)
    assert simulator.initialise(TIGHT)["status"] == "initialised"
    return simulator


def _ctx(config: dict[str, Any] | None = None) -> CallContext:
    return CallContext(provider_config={}, config=config or {})


def _subnet(sim: LocalSimulator) -> str:
    subnet_id: str = sim.list_subnets(PROJECT)[0]["id"]
    return subnet_id


def _cluster_plan(sim: LocalSimulator, name: str = "c1") -> dict[str, Any]:
    return {
        "parent_id": PROJECT,
        "name": name,
        "labels": None,
        "control_plane": {
            "subnet_id": _subnet(sim),
            "version": "1.32",
            "etcd_cluster_size": 1,
            "endpoints": {"public_endpoint": {}},
        },
        "id": None,
        "status": None,
    }


def _node_group_plan(cluster_id: str, count: int = 1) -> dict[str, Any]:
    return {
        "parent_id": cluster_id,
        "name": "ng-cpu",
        "fixed_node_count": count,
        "template": {
            "resources": {"platform": "cpu-d3", "preset": "4vcpu-16gb"},
            "boot_disk": {"size_gibibytes": 64, "type": "NETWORK_SSD"},
            "network_interfaces": [{"subnet_id": "x", "public_ip_address": None}],
            "preemptible": None,
            "underlay_required": False,
        },
    }


def test_cluster_create_read_delete_through_the_simulator(sim: LocalSimulator) -> None:
    handler = nebius.RESOURCES["nebius_mk8s_v1_cluster"]
    state = handler.create(_ctx(), _cluster_plan(sim))
    record = sim.get_cluster(state["id"])
    assert record["name"] == "c1" and record["state"] == "RUNNING"
    endpoint = state["status"]["control_plane"]["endpoints"]["public_endpoint"]
    assert "://" not in endpoint and endpoint.startswith(f"pub.{state['id']}")
    assert state["status"]["state"] == "RUNNING"
    assert handler.read(_ctx(), state) == state
    imported = handler.import_(_ctx(), state["id"])
    assert imported["control_plane"]["subnet_id"] == _subnet(sim)
    handler.delete(_ctx(), state)
    assert handler.read(_ctx(), state) is None


def test_a_retried_create_replays_but_a_foreign_object_of_the_same_name_fails(sim: LocalSimulator) -> None:
    handler = nebius.RESOURCES["nebius_mk8s_v1_cluster"]
    first = handler.create(_ctx(), _cluster_plan(sim))
    again = handler.create(_ctx(), _cluster_plan(sim))
    assert again["id"] == first["id"]  # the same request: the provider's crash recovery
    other = _cluster_plan(sim)
    other["control_plane"]["etcd_cluster_size"] = 3  # another caller's request under the same name
    with pytest.raises(ProviderError) as err:
        handler.create(_ctx(), other)
    assert "already-exists" in err.value.summary or "AlreadyExists" in err.value.summary
    assert len(sim.list_clusters(PROJECT)) == 1


def test_the_identical_create_from_another_terraform_working_directory_fails_already_exists(
    sim: LocalSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller is the Terraform working directory (another stack's, another fleet's): its identical
    request is not a replay of this stack's create, so it does not get this stack's cluster."""
    handler = nebius.RESOURCES["nebius_mk8s_v1_cluster"]
    for name in ("stack-a", "stack-b"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "stack-a")
    first = handler.create(_ctx(), _cluster_plan(sim))
    assert handler.create(_ctx(), _cluster_plan(sim))["id"] == first["id"]  # stack-a's retry: a replay
    monkeypatch.chdir(tmp_path / "stack-b")
    with pytest.raises(ProviderError) as err:
        handler.create(_ctx(), _cluster_plan(sim))
    assert "already-exists" in err.value.summary or "AlreadyExists" in err.value.summary
    assert [c["id"] for c in sim.list_clusters(PROJECT)] == [first["id"]]


def test_node_group_create_resize_and_import(sim: LocalSimulator) -> None:
    cluster = nebius.RESOURCES["nebius_mk8s_v1_cluster"].create(_ctx(), _cluster_plan(sim))
    groups = nebius.RESOURCES["nebius_mk8s_v1_node_group"]
    plan = _node_group_plan(cluster["id"])
    state = groups.create(_ctx(), plan)
    record = sim.get_node_group(state["id"])
    assert (record["platform"], record["preset"], record["target_node_count"]) == ("cpu-d3", "4vcpu-16gb", 1)
    assert record["disk_size_gib"] == 64
    assert state["status"]["state"] == "RUNNING" and state["version"] == "1.32"
    resized = groups.update(_ctx(), _node_group_plan(cluster["id"], count=2), state)
    assert sim.get_node_group(state["id"])["target_node_count"] == 2
    assert resized["status"]["target_node_count"] == 2
    imported = groups.import_(_ctx(), state["id"])
    assert imported["parent_id"] == cluster["id"] and imported["fixed_node_count"] == 2
    # Resized outside Terraform: a refresh reads the service's size, so the plan shows the way back.
    sim.resize_node_group(state["id"], 3)
    refreshed = groups.read(_ctx(), resized)
    assert refreshed is not None and refreshed["fixed_node_count"] == 3


def _upstream_cloud_init(mount_path: str, options: str) -> str:
    """Upstream's k8s-cloud-init.tftpl rendered for a node with the shared filesystem (its `%{ if }`
    branch taken, its variables filled in), with `options` where upstream writes "defaults"."""
    template = (upstream_library() / "modules" / "cloud-init" / "k8s-cloud-init.tftpl").read_text()
    lines = [line for line in template.splitlines() if not line.startswith("%{")]
    values = {
        "filestore_mount_path": mount_path,
        "ssh_user_name": "ubuntu",
        "ssh_public_key": "ssh-ed25519 AAA",
    }
    text = "\n".join(lines).replace('"defaults"', f'"{options}"')
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text


def test_a_node_group_mounts_what_its_cloud_init_mounts(sim: LocalSimulator) -> None:
    cluster = nebius.RESOURCES["nebius_mk8s_v1_cluster"].create(_ctx(), _cluster_plan(sim))
    plan = _node_group_plan(cluster["id"])
    plan["template"]["cloud_init_user_data"] = _upstream_cloud_init("/mnt/data", "defaults,nofail")
    state = nebius.RESOURCES["nebius_mk8s_v1_node_group"].create(_ctx(), plan)
    mount = sim.get_node_group(state["id"])["mount"]
    assert mount == {"tag": "data", "path": "/mnt/data", "fs_type": "virtiofs", "options": "defaults,nofail"}

    plain = _node_group_plan(cluster["id"])
    plain["name"] = "ng-plain"
    plain["template"]["cloud_init_user_data"] = "#cloud-config\npackage_update: true\n"
    state = nebius.RESOURCES["nebius_mk8s_v1_node_group"].create(_ctx(), plain)
    assert sim.get_node_group(state["id"])["mount"] is None


def test_filesystem_resource_and_data_source(sim: LocalSimulator) -> None:
    fs = nebius.RESOURCES["nebius_compute_v1_filesystem"]
    state = fs.create(
        _ctx(),
        {
            "parent_id": PROJECT,
            "name": "shared",
            "type": "NETWORK_SSD",
            "size_bytes": 10 * GIB,
            "block_size_bytes": 4096,
        },
    )
    assert state["status"]["size_bytes"] == 10 * GIB and state["status"]["state"] == "READY"
    data = nebius.DATA_SOURCES["nebius_compute_v1_filesystem"].read_data(_ctx(), {"id": state["id"]})
    assert data["status"]["size_bytes"] == 10 * GIB and data["name"] == "shared"
    with pytest.raises(ProviderError):
        fs.create(_ctx(), {"parent_id": PROJECT, "name": "nosize", "type": "NETWORK_SSD"})


def test_gpu_operator_release_becomes_the_cluster_addons(sim: LocalSimulator) -> None:
    cluster = nebius.RESOURCES["nebius_mk8s_v1_cluster"].create(_ctx(), _cluster_plan(sim))
    releases = nebius.RESOURCES["nebius_applications_v1alpha1_k8s_release"]
    plan = {
        "parent_id": PROJECT,
        "cluster_id": cluster["id"],
        "application_name": "gpu-operator",
        "namespace": "gpu-operator",
        "product_slug": "nebius/nvidia-gpu-operator",
        "sensitive": {"set": None, "values": None, "version": "abc"},
    }
    # the write-only map arrives in the configuration only; its values never reach the database
    config = {**plan, "sensitive": {"set": {"mig.strategy": "single", "secret.token": "s3cr3t"}}}
    state = releases.create(_ctx(config), plan)
    assert state["status"]["state"] == "DEPLOYED"
    addons = sim.get_cluster(cluster["id"])["addons"]
    assert addons["gpu_driver"] == "operator" and addons["mig"]["strategy"] == "single"
    assert "s3cr3t" not in sim.path.read_bytes().decode(errors="replace")
    assert releases.read(_ctx(), state) is not None
    releases.delete(_ctx(), state)
    assert "gpu_driver" not in sim.get_cluster(cluster["id"])["addons"]
    assert releases.read(_ctx(), state) is None


def test_iam_group_access_key_and_unmodelled_types(sim: LocalSimulator) -> None:
    tenant = sim.principal()["tenant_id"]
    group = nebius.DATA_SOURCES["nebius_iam_v1_group"].read_data(
        _ctx(), {"name": "editors", "parent_id": tenant}
    )
    assert group["id"].startswith("group-e00")
    account = nebius.RESOURCES["nebius_iam_v1_service_account"].create(
        _ctx(), {"parent_id": PROJECT, "name": "sa1"}
    )
    key = nebius.RESOURCES["nebius_iam_v2_access_key"].create(
        _ctx(), {"parent_id": PROJECT, "account": {"service_account": {"id": account["id"]}}}
    )
    assert key["status"]["secret"] and key["status"]["aws_access_key_id"]
    keys = nebius.RESOURCES["nebius_iam_v2_access_key"]
    assert keys.read(_ctx(), key) == key  # the secret is shown once: a read keeps the create's
    accounts = nebius.RESOURCES["nebius_iam_v1_service_account"]
    assert accounts.read(_ctx(), account) == account
    accounts.delete(_ctx(), account)
    assert accounts.read(_ctx(), account) is None
    with pytest.raises(ProviderError):
        nebius.RESOURCES["nebius_compute_v1_nvl_instance_group"].create(_ctx(), {"parent_id": PROJECT})


def test_worker_answers_errors_as_diagnostics_without_values(sim: LocalSimulator) -> None:
    requests = [
        {"id": 1, "method": "read", "type": "nebius_mk8s_v1_cluster", "state": {"id": "mk8scluster-e00nope"}},
        {"id": 2, "method": "create", "type": "nebius_nope", "planned": {}},
        {
            "id": 3,
            "method": "create",
            "type": "nebius_mk8s_v1_cluster",
            "planned": {
                "parent_id": PROJECT,
                "name": "x",
                "control_plane": {"subnet_id": "vpcsubnet-e00missing"},
                "labels": {"token": "s3cr3t"},
            },
        },
    ]
    out = io.StringIO()
    serve(PROVIDERS["nebius/nebius"], io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0] == {"id": 1, "result": None}
    assert "nebius_nope" in answers[1]["error"]["summary"]
    assert answers[2]["id"] == 3 and "error" in answers[2]
    assert "s3cr3t" not in out.getvalue()


def test_the_gpu_operator_release_s_pins_and_rtx_profile_reach_what_the_cluster_runs(
    sim: LocalSimulator,
) -> None:
    """The chart values the fleet's override files put in the release (MIG pins, the RTX driver profile)
    become what the chart would leave in the cluster: the ClusterPolicy's versions and the RTX driver."""
    cluster = nebius.RESOURCES["nebius_mk8s_v1_cluster"].create(_ctx(), _cluster_plan(sim))
    releases = nebius.RESOURCES["nebius_applications_v1alpha1_k8s_release"]
    plan = {
        "parent_id": PROJECT,
        "cluster_id": cluster["id"],
        "application_name": "gpu-operator",
        "namespace": "gpu-operator",
        "product_slug": "nebius/nvidia-gpu-operator",
        "sensitive": {"set": None, "values": None, "version": "abc"},
    }
    values = {
        "mig.strategy": "mixed",
        "migManager.config.default": "all-1g.24gb",
        "migManager.version": "v0.14.2",
        "driver.version": "580.95.05",
        "nebius.nvidiaDriverCRDPatch.profiles[0].platform": "gpu-rtx6000",
        "nebius.nvidiaDriverCRDPatch.profiles[0].preset": "1gpu-24vcpu-218gb",
        "driver.rdma.enabled": "false",
        "driver.repoConfig.configMapName": "npa-driver-repositories",
        "toolkit.env[0].name": "RUNTIME_CONFIG_SOURCE",
        "toolkit.env[0].value": "file",
        REVISION_VALUE_KEY: "rev-1",
    }
    releases.create(_ctx({**plan, "sensitive": {"set": values}}), plan)
    addons = sim.get_cluster(cluster["id"])["addons"]
    mig = addons["mig"]
    assert (mig["strategy"], mig["config"]) == ("mixed", "all-1g.24gb")
    assert mig["versions"] == {
        "operator": "",
        "driver": "580.95.05",
        "device_plugin": "",
        "gfd": "",
        "mig_manager": "v0.14.2",
    }
    rtx = addons["rtx_driver"]
    assert (rtx["platform"], rtx["preset"]) == ("gpu-rtx6000", "1gpu-24vcpu-218gb")
    assert rtx["values"]["driver"] == {
        "rdma": {"enabled": False},
        "repoConfig": {"configMapName": "npa-driver-repositories"},
    }
    assert rtx["values"]["toolkit"]["env"] == [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    assert rtx["revision"] == "rev-1"  # the chart's daemonsets.annotations, which rolls the driver pods


def test_node_group_and_control_plane_versions_are_honoured_on_create_update_and_read(
    sim: LocalSimulator,
) -> None:
    """Issue 58: a pinned pool's node group runs its own version. As the mk8s API does, a group is
    created at the version asked (else its control plane's), a changed `version` or
    `control_plane.version` upgrades in place, a group never gets newer than its control plane, and a
    read reports the service's version (an upgrade outside Terraform shows in a refresh)."""
    clusters = nebius.RESOURCES["nebius_mk8s_v1_cluster"]
    groups = nebius.RESOURCES["nebius_mk8s_v1_node_group"]
    cluster = clusters.create(_ctx(), _cluster_plan(sim))
    held = groups.create(_ctx(), {**_node_group_plan(cluster["id"]), "version": "1.31"})
    assert sim.get_node_group(held["id"])["version"] == "1.31" and held["version"] == "1.31"
    follows = groups.create(_ctx(), {**_node_group_plan(cluster["id"]), "name": "ng-two"})
    assert sim.get_node_group(follows["id"])["version"] == "1.32" == follows["version"]

    upgraded = {
        **_cluster_plan(sim),
        "control_plane": {**_cluster_plan(sim)["control_plane"], "version": "1.33"},
    }
    after = clusters.update(_ctx(), upgraded, cluster)
    assert sim.get_cluster(cluster["id"])["k8s_version"] == "1.33"
    assert after["status"]["control_plane"]["version"] == "1.33"
    assert sim.get_node_group(held["id"])["version"] == "1.31"  # the control plane alone moved

    moved = groups.update(_ctx(), {**_node_group_plan(cluster["id"]), "version": "1.33"}, held)
    assert sim.get_node_group(held["id"])["version"] == "1.33" and moved["version"] == "1.33"
    with pytest.raises(ProviderError):
        groups.update(_ctx(), {**_node_group_plan(cluster["id"]), "version": "1.34"}, moved)
    with pytest.raises(ProviderError):  # the control plane moves one minor at a time
        clusters.update(
            _ctx(), {**upgraded, "control_plane": {**upgraded["control_plane"], "version": "1.35"}}, after
        )
    sim.upgrade_node_group(follows["id"], "1.33")  # outside Terraform
    refreshed = groups.read(_ctx(), follows)
    assert refreshed is not None and refreshed["version"] == "1.33"
