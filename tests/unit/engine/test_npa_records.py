"""The original tool's registrations (engine/registrations/npa_records.py): a kubeconfig write also writes
`<NPA_CONFIG_DIR or ~/.npa>/clusters/<context>/` (kubeconfig, cluster.json, metadata.json) as `npa fleet`
did, private, with nothing secret in the JSON; a record of another cluster or fleet is left byte for byte
as it was (the write is skipped with a warning, the deploy stands); a stale record of ours is replaced;
`destroy` removes only this fleet's record of that cluster, and local cleanup removes it as residue."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any, cast

import pytest

from npa_pulumi.cloud.errors import NotFound
from npa_pulumi.cloud.port import CloudPort, Cluster, NodeGroup
from npa_pulumi.engine.registrations import kubeconfigs, npa_records
from npa_pulumi.engine.teardown import local_cleanup
from npa_pulumi.kube.kubeconfig import ClientCertificate, ClusterAccess
from npa_pulumi.plan.targets import Target, resolve_targets
from npa_pulumi.spec.parse import load_spec

KEY = "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n"
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: reg
region: eu-north1
defaults:
  cpu_nodes: {count: 2, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: gpu
    clusters:
      - name: train
        gpu_nodes: {count: 3, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
      - name: cpu
"""
CONTEXT = "fleet-reg-gpu-train"
CLUSTER_ID = "mk8scluster-e00train"
PROJECT_ID = "project-e00gpu"
HINT = "npa-pulumi destroy --spec fleet.yaml --cloud local --only-projects gpu --only-clusters train --yes"


def _group(group_id: str, cluster_id: str, name: str, platform: str, preset: str) -> NodeGroup:
    return NodeGroup(
        id=group_id,
        cluster_id=cluster_id,
        name=name,
        state="RUNNING",
        target_node_count=1,
        platform=platform,
        preset=preset,
    )


class FakeCloud:
    """The cloud port's reads a registration makes: the cluster, its node groups, its credentials."""

    def __init__(self) -> None:
        self.clusters = {
            CLUSTER_ID: Cluster(
                id=CLUSTER_ID,
                project_id=PROJECT_ID,
                name="train",
                state="RUNNING",
                endpoint="https://203.0.113.7:443",
                k8s_version="1.31.4",
                subnet_id="vpcsubnet-e00live",
            ),
            "mk8scluster-e00cpu": Cluster(
                id="mk8scluster-e00cpu", project_id=PROJECT_ID, name="cpu", state="RUNNING"
            ),
        }
        self.groups = {
            CLUSTER_ID: [
                _group("ng-cpu", CLUSTER_ID, "train-ng-cpu", "cpu-d3", "4vcpu-16gb"),
                _group("ng-gpu-1", CLUSTER_ID, "train-ng-gpu-1", "gpu-h200-sxm", "8gpu-128vcpu-1600gb"),
                _group("ng-gpu-0", CLUSTER_ID, "train-ng-gpu-0", "gpu-h200-sxm", "8gpu-128vcpu-1600gb"),
            ],
            "mk8scluster-e00cpu": [
                _group("ng-only", "mk8scluster-e00cpu", "cpu-ng-cpu", "cpu-d3", "4vcpu-16gb")
            ],
        }

    def get_cluster(self, cluster_id: str) -> Cluster:
        if cluster_id not in self.clusters:
            raise NotFound(f"cluster {cluster_id} not found")
        return self.clusters[cluster_id]

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        return list(self.groups.get(cluster_id, []))

    def cluster_access(self, cluster_id: str) -> ClusterAccess:
        self.get_cluster(cluster_id)
        return ClusterAccess(
            server=f"https://{cluster_id}.local:6443",
            ca_pem="CA",
            credential=ClientCertificate("CERT", KEY),
        )


@pytest.fixture
def targets(tmp_path: Path) -> dict[str, Target]:
    path = tmp_path / "fleet.yaml"
    path.write_text(SPEC)
    return {t.cluster_name: t for t in resolve_targets(load_spec(path))}


def _write(
    targets: dict[str, Target],
    cloud: FakeCloud,
    name: str = "train",
    cluster_id: str = CLUSTER_ID,
    warnings: list[str] | None = None,
) -> kubeconfigs.Registration:
    return kubeconfigs.write(
        cloud,
        targets[name],
        context=f"fleet-reg-gpu-{name}",
        cluster_id=cluster_id,
        project_id=PROJECT_ID,
        cloud="local",
        profile="",
        teardown_hint=HINT,
        warn=(warnings if warnings is not None else []).append,
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _read(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text()))


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_kubeconfig_write_registers_the_cluster_as_the_original_did(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    registration = _write(targets, FakeCloud())
    directory = isolated_home / ".npa" / "clusters" / CONTEXT
    assert registration.npa_record == str(directory)
    assert sorted(p.name for p in directory.iterdir()) == ["cluster.json", "kubeconfig", "metadata.json"]
    # the kubeconfig is npa-pulumi's own, copied
    assert (directory / "kubeconfig").read_text() == Path(registration.kubeconfig).read_text()

    record = _read(directory / "cluster.json")
    created = record.pop("created_at")
    seen = record.pop("last_seen_at")
    assert created == seen and created.endswith("Z")
    assert record == {
        "name": CONTEXT,
        "cluster_id": CLUSTER_ID,
        "project_id": PROJECT_ID,
        "region": "eu-north1",
        "node_count": 5,  # CPU + GPU
        "node_platform": "gpu-h200-sxm",  # the GPU pool's
        "node_preset": "8gpu-128vcpu-1600gb",
        "k8s_version": "1.31.4",  # the live cluster's
        "subnet_id": "vpcsubnet-e00live",
        "last_seen_state": "RUNNING",
        "node_group_id": "ng-gpu-0",  # the GPU pool's first node group by name
        "endpoint": "https://203.0.113.7:443",
        "kubeconfig_path": str(directory / "kubeconfig"),
        "provider_name": "train",
    }
    metadata = _read(directory / "metadata.json")
    assert metadata.pop("updated_at").endswith("Z")
    assert metadata == {
        "managed_by": "npa fleet",  # what the original's readers require of a fleet target
        "written_by": "npa-pulumi",
        "fleet": "reg",
        "project_key": "gpu",
        "event": "kubeconfig_written",
        "teardown_hint": HINT,
    }
    # private: 0600 files, 0700 directories, and nothing secret outside the kubeconfig
    assert {_mode(directory / n) for n in npa_records.RECORD_FILES} == {0o600}
    for path in (isolated_home / ".npa", isolated_home / ".npa" / "clusters", directory):
        assert _mode(path) == 0o700, path
    for name in ("cluster.json", "metadata.json"):
        text = (directory / name).read_text()
        assert "secret-key-material" not in text and "PRIVATE KEY" not in text and "client-key" not in text


def test_a_rewrite_keeps_created_at_and_a_cpu_cluster_reports_its_cpu_pool(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    cloud = FakeCloud()
    _write(targets, cloud)
    path = isolated_home / ".npa" / "clusters" / CONTEXT / "cluster.json"
    first = _read(path)
    first["created_at"] = "2025-01-01T00:00:00Z"
    path.write_text(json.dumps(first))
    _write(targets, cloud)
    again = _read(path)
    assert again["created_at"] == "2025-01-01T00:00:00Z" and again["last_seen_at"] != again["created_at"]

    _write(targets, cloud, name="cpu", cluster_id="mk8scluster-e00cpu")
    cpu = _read(isolated_home / ".npa" / "clusters" / "fleet-reg-gpu-cpu" / "cluster.json")
    assert (cpu["node_count"], cpu["node_platform"], cpu["node_preset"], cpu["node_group_id"]) == (
        2,
        "cpu-d3",
        "4vcpu-16gb",
        "ng-only",
    )
    assert cpu["k8s_version"] == targets["cpu"].cluster.k8s_version  # the live cluster says none


def test_npa_config_dir_moves_the_registrations(
    isolated_home: Path, targets: dict[str, Target], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NPA_CONFIG_DIR", str(tmp_path / "npa-config"))
    registration = _write(targets, FakeCloud())
    directory = tmp_path / "npa-config" / "clusters" / CONTEXT
    assert registration.npa_record == str(directory) and (directory / "cluster.json").is_file()
    assert _read(directory / "cluster.json")["kubeconfig_path"] == str(directory / "kubeconfig")
    assert not (isolated_home / ".npa").exists()


def _plant(directory: Path, cluster: dict[str, Any] | None, metadata: dict[str, Any] | None) -> None:
    directory.mkdir(parents=True)
    (directory / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    if cluster is not None:
        (directory / "cluster.json").write_text(json.dumps(cluster))
    if metadata is not None:
        (directory / "metadata.json").write_text(json.dumps(metadata))


THEIRS = {"managed_by": "npa fleet", "fleet": "reg", "project_key": "gpu", "event": "kubeconfig_written"}


@pytest.mark.parametrize(
    ("cluster", "metadata", "why", "destroy_removes"),
    [
        # the original deployed its own cluster under this context: never ours to overwrite
        (
            {"cluster_id": "mk8scluster-e00other", "project_id": PROJECT_ID},
            THEIRS,
            "mk8scluster-e00other",
            False,
        ),
        # the original's refusal: the same context recording another project (destroying that very cluster
        # id of this fleet still removes it: the cluster it names is gone)
        ({"cluster_id": CLUSTER_ID, "project_id": "project-e00else"}, THEIRS, "project-e00else", True),
        (
            {"cluster_id": CLUSTER_ID, "project_id": PROJECT_ID},
            {**THEIRS, "fleet": "other"},
            "'other'",
            False,
        ),
        ({"cluster_id": CLUSTER_ID, "project_id": PROJECT_ID}, {**THEIRS, "project_key": "x"}, "'x'", False),
        (None, THEIRS, "no cluster.json", False),
    ],
)
def test_a_record_of_another_cluster_or_fleet_is_left_as_it_is(
    isolated_home: Path,
    targets: dict[str, Target],
    cluster: dict[str, Any] | None,
    metadata: dict[str, Any] | None,
    why: str,
    destroy_removes: bool,
) -> None:
    directory = isolated_home / ".npa" / "clusters" / CONTEXT
    _plant(directory, cluster, metadata)
    before = _snapshot(directory)
    warnings: list[str] = []
    registration = _write(targets, FakeCloud(), warnings=warnings)
    assert _snapshot(directory) == before  # byte for byte
    assert registration.npa_record == ""
    [warning] = warnings
    assert str(directory) in warning and why in warning and warning.startswith("reg.gpu.train: ")
    # the deploy's own kubeconfig and registration stand
    assert Path(registration.kubeconfig).is_file() and kubeconfigs.registered(CONTEXT) == registration
    # and destroy leaves another fleet's or cluster's record alone too
    assert kubeconfigs.remove(CONTEXT, "reg.gpu.train", fleet="reg", project_key="gpu", cluster_id=CLUSTER_ID)
    if destroy_removes:
        assert not (directory / "cluster.json").exists()
    else:
        assert _snapshot(directory) == before


def test_an_unreadable_record_is_left_as_it_is(isolated_home: Path, targets: dict[str, Target]) -> None:
    directory = isolated_home / ".npa" / "clusters" / CONTEXT
    directory.mkdir(parents=True)
    (directory / "cluster.json").write_text("{not json")
    warnings: list[str] = []
    assert _write(targets, FakeCloud(), warnings=warnings).npa_record == ""
    assert (directory / "cluster.json").read_text() == "{not json" and "not JSON" in warnings[0]


def test_a_stale_record_of_ours_whose_cluster_is_gone_is_replaced(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    directory = isolated_home / ".npa" / "clusters" / CONTEXT
    ours = {**THEIRS, "written_by": "npa-pulumi"}
    _plant(directory, {"cluster_id": "mk8scluster-e00gone", "project_id": PROJECT_ID}, ours)
    warnings: list[str] = []
    assert _write(targets, FakeCloud(), warnings=warnings).npa_record == str(directory)
    assert warnings == [] and _read(directory / "cluster.json")["cluster_id"] == CLUSTER_ID

    # ... but not while the cluster it names still exists
    cloud = FakeCloud()
    shutil.rmtree(directory)
    _plant(directory, {"cluster_id": "mk8scluster-e00cpu", "project_id": PROJECT_ID}, ours)
    assert _write(targets, cloud, warnings=warnings).npa_record == ""
    assert "mk8scluster-e00cpu" in warnings[0]


def test_a_cloud_read_failure_skips_the_record_not_the_kubeconfig(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    class Flaky(FakeCloud):
        def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
            raise NotFound("node groups unavailable")

    warnings: list[str] = []
    registration = _write(targets, Flaky(), warnings=warnings)
    assert registration.npa_record == "" and Path(registration.kubeconfig).is_file()
    assert "cannot be read from the cloud" in warnings[0]
    assert not (isolated_home / ".npa" / "clusters" / CONTEXT).exists()


def test_destroy_removes_this_fleets_record_of_that_cluster(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    registration = _write(targets, FakeCloud())
    directory = Path(registration.npa_record)
    # another fleet's or cluster's removal never touches it
    assert not npa_records.unregister(CONTEXT, fleet="other", project_key="gpu", cluster_id=CLUSTER_ID)
    assert not npa_records.unregister(CONTEXT, fleet="reg", project_key="gpu", cluster_id="mk8s-x")
    assert not npa_records.unregister(CONTEXT, fleet="reg", project_key="gpu", cluster_id="")
    assert directory.is_dir()
    # the cluster id comes from npa-pulumi's registration when the caller has none
    assert kubeconfigs.remove(CONTEXT, "reg.gpu.train", fleet="reg", project_key="gpu")
    assert not directory.exists() and not Path(registration.kubeconfig).exists()
    assert kubeconfigs.registered(CONTEXT) is None
    assert (isolated_home / ".npa" / "clusters").is_dir()  # only the cluster's own directory goes


def test_destroy_without_npa_pulumis_registration_still_removes_the_record(
    isolated_home: Path, targets: dict[str, Target]
) -> None:
    """A stack destroyed from this machine whose registration is gone (another machine wrote it): the
    destroyed cluster's id proves the record."""
    registration = _write(targets, FakeCloud())
    Path(kubeconfigs.registration_path(CONTEXT)).unlink()
    (Path(registration.npa_record) / "notes.txt").write_text("a user's own file")
    assert not kubeconfigs.remove(CONTEXT, "reg.gpu.train", fleet="reg", project_key="gpu")
    assert (Path(registration.npa_record) / "cluster.json").exists()  # no id known: kept
    kubeconfigs.remove(CONTEXT, "reg.gpu.train", fleet="reg", project_key="gpu", cluster_id=CLUSTER_ID)
    directory = Path(registration.npa_record)
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt"]  # the record's files only


def test_local_cleanup_removes_the_record_of_a_gone_stack(
    isolated_home: Path, targets: dict[str, Target], tmp_path: Path
) -> None:
    registration = _write(targets, FakeCloud())
    backend = f"file://{tmp_path / 'state'}"  # holds no stack: the cluster's stack is gone
    report = local_cleanup.survey(backend)
    [item] = [i for i in report.items if i.kind == "npa-registration"]
    assert item.path == registration.npa_record and item.removable and item.stack == "reg.gpu.train"
    local_cleanup.remove_residue(report)
    assert not Path(registration.npa_record).exists()


def test_local_cleanup_never_lists_a_record_that_is_no_longer_ours(
    isolated_home: Path, targets: dict[str, Target], tmp_path: Path
) -> None:
    registration = _write(targets, FakeCloud())
    cluster_json = Path(registration.npa_record) / "cluster.json"
    record = _read(cluster_json)
    cluster_json.write_text(json.dumps({**record, "cluster_id": "mk8scluster-e00theirs"}))
    report = local_cleanup.survey(f"file://{tmp_path / 'state'}")
    assert [i for i in report.items if i.kind == "npa-registration"] == []


def test_register_takes_the_cloud_port(isolated_home: Path, targets: dict[str, Target]) -> None:
    """`npa_records.register` on its own, as adopt or any other writer of a kubeconfig calls it."""
    port = cast(CloudPort, FakeCloud())
    done = npa_records.register(
        port,
        npa_records.NpaRegistration(
            context=CONTEXT,
            fleet="reg",
            project_key="gpu",
            project_id="",  # unknown to the caller: the live cluster's project
            cluster_id=CLUSTER_ID,
            shape=npa_records.ClusterShape.of(targets["train"]),
            teardown_hint=HINT,
        ),
        "apiVersion: v1\n",
    )
    assert done.written and _read(done.directory / "cluster.json")["project_id"] == PROJECT_ID
