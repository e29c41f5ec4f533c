"""`npa-pulumi preflight` and `npa-pulumi status` end to end: the real CLI, the `nebius` adapter, the fake.

Each test runs the CLI as a subprocess (`python -m npa_pulumi.cli.main ... --cloud nebius`), configured
only the way a user configures it: a `~/.nebius/config.yaml` profile in a private HOME, the
`NPA_NEBIUS_ENDPOINT` / `NPA_NEBIUS_INSECURE` routing variables, `--backend` and `--passphrase-file`.
The loopback fake runs in this process, so the test can seed it and then read what crossed the wire.

`status` reads each cluster stack's outputs from the Pulumi backend before it asks the cloud. A cluster
cannot be deployed here through the real k8s-training recipe, so the tests create the cluster stacks
themselves in a temporary `file://` backend, with a tiny inline Automation-API program that exports the
outputs a deployed cluster stack has (`cluster_id`, `project_id`, `kube_context`, `npa_fingerprint`...).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from nebius.api.nebius.mk8s import v1 as mk8s
from wire.fake import FakeNebius
from wire.fleet import EXISTING_PROJECT, RECIPE, REPO, SSH_KEY
from wire.world import OTHER_TENANT, TENANT, TOKEN, WireWorld, wire_world

from npa_pulumi.engine.automation.workspace import EngineSettings, select_or_create_stack

pytestmark = pytest.mark.integration

FLEET = "wire-fleet"
REGION = "eu-north1"
EXISTING = EXISTING_PROJECT
BLOCK = "capacityblockgroup-e00h100reserved"
GIB = 1024**3
TIB = 1024 * GIB


def _quota(name: str, limit: int | None, usage: int = 0, unit: str = "count") -> dict[str, Any]:
    record: dict[str, Any] = {"name": name, "region": REGION, "usage": usage, "unit": unit}
    if limit is not None:
        record["limit"] = limit
    return record


# Every allowance the preflight reads for an mk8s cluster in a new project, generous except where a test
# says otherwise: no on-demand H100 quota at all, and one capacity block group with 8 of 16 GPUs free.
CLI_TENANT: dict[str, Any] = {
    "tenant_id": TENANT,
    "regions": [REGION],
    "quotas": [
        _quota("iam.project.count", 20),
        _quota("mk8s.cluster.count", 10, usage=1),
        _quota("vpc.allocation.count", 500),
        _quota("compute.instance.count", 100, usage=3),
        _quota("compute.instance.preemptible.count", 0),
        _quota("compute.instance.non-gpu.vcpu", 512, usage=12),
        _quota("compute.instance.gpu.h100", 0),
        _quota("compute.disk.count", 100),
        _quota("compute.disk.size.network-ssd", 64 * TIB, unit="byte"),
        _quota("compute.gpucluster.count", 4),
        _quota("compute.filesystem.count", 10),
        _quota("compute.filesystem.size.network-ssd", 16 * TIB, unit="byte"),
        _quota("storage.bucket.count", 10),
        _quota("storage.bucket.size.standard", 64 * TIB, unit="byte"),
        _quota("vpc.network.count", 10, usage=1),
        _quota("vpc.subnet.count", 20, usage=1),
        _quota("vpc.pool.count", 40, usage=2),
        _quota("vpc.routetable.count", 20, usage=1),
        _quota("vpc.route.count", 40, usage=1),
    ],
    "capacity_block_groups": [
        {
            "id": BLOCK,
            "region": REGION,
            "platform": "gpu-h100-sxm",
            "fabric": "fabric-3",
            "limit": 16,
            "usage": 8,
            "state": "ACTIVE",
        }
    ],
    "projects": [{"id": EXISTING, "name": "existing", "region": REGION}],
}


def reserved_cluster(name: str, nodes: int) -> str:
    """A CPU node plus `nodes` 8-GPU H100 nodes drawn STRICTly from the capacity block group."""
    return f"""
      - name: {name}
        gpu_nodes:
          count: {nodes}
          platform: gpu-h100-sxm
          preset: 8gpu-128vcpu-1600gb
          capacity_block_group: {BLOCK}
        enable_gpu_cluster: true
        infiniband_fabric: fabric-3"""


def on_demand_cluster(name: str, nodes: int) -> str:
    return f"""
      - name: {name}
        gpu_nodes: {{ count: {nodes}, platform: gpu-h100-sxm, preset: 8gpu-128vcpu-1600gb }}
        enable_gpu_cluster: false"""


def cpu_cluster(name: str) -> str:
    return f"""
      - name: {name}"""


def spec_text(new_project: list[str], existing_project: list[str] | None = None) -> str:
    """A fleet with project `a` (created by the fleet) and optionally the existing project by id."""
    text = f"""apiVersion: npa.fleet/v0.0.1
name: {FLEET}
region: {REGION}
project_prefix: wire-
ssh_public_key: "{SSH_KEY}"
defaults:
  cpu_nodes: {{ count: 1, platform: cpu-d3, preset: 4vcpu-16gb }}
  enable_filestore: false
projects:
  - name: a
    clusters:{"".join(new_project)}
"""
    if existing_project:
        text += f"""  - project_id: {EXISTING}
    clusters:{"".join(existing_project)}
"""
    return text


@dataclass
class CliWorld:
    wire: WireWorld
    tmp: Path
    backend: str
    passphrase: Path

    @property
    def fake(self) -> FakeNebius:
        return self.wire.fake

    def spec(self, text: str) -> Path:
        path = self.tmp / "fleet.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    def npa(self, command: str, spec: Path, *extra: str) -> Result:
        args = [
            command,
            "--spec",
            str(spec),
            "--cloud",
            "nebius",
            "--recipe-dir",
            str(RECIPE),
            "--backend",
            self.backend,
            "--passphrase-file",
            str(self.passphrase),
            "--output",
            "json",
            *extra,
        ]
        proc = subprocess.run(
            [sys.executable, "-m", "npa_pulumi.cli.main", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=300,
            cwd=REPO,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def settings(self) -> EngineSettings:
        return EngineSettings.resolve(self.backend, self.passphrase)

    def seed_stack(self, project_key: str, cluster: str | None, outputs: dict[str, Any]) -> None:
        """A stack `<fleet>.<project_key>[.<cluster>]` whose only content is these outputs."""

        def program() -> None:
            import pulumi

            for key, value in outputs.items():
                pulumi.export(key, value)

        name = f"{FLEET}.{project_key}" + (f".{cluster}" if cluster else "")
        stack = select_or_create_stack(self.settings(), name, program)
        stack.up(on_output=lambda _line: None)
        assert {k: v.value for k, v in stack.outputs().items()} == outputs


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(
                f"not JSON (exit {self.code}):\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
            ) from None

    def explain(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"


@pytest.fixture
def world(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliWorld]:
    with wire_world(tmp_path, monkeypatch, CLI_TENANT) as wire:
        assert wire.home == isolated_home
        state = tmp_path / "state"
        state.mkdir()
        passphrase = tmp_path / "passphrase"
        passphrase.write_text("wire-test-passphrase\n", encoding="utf-8")
        passphrase.chmod(0o600)
        yield CliWorld(wire, tmp_path, f"file://{state}", passphrase)


def assert_no_token(result: Result) -> None:
    assert TOKEN not in result.stdout and TOKEN not in result.stderr


# ------------------------------------------------------------------------------------------ preflight


def test_preflight_that_fits_exits_zero(world: CliWorld) -> None:
    spec = world.spec(spec_text([reserved_cluster("train", 1)], [cpu_cluster("cpu")]))
    result = world.npa("preflight", spec)
    assert result.code == 0, result.explain()
    report = result.json()
    assert report["ok"] is True and report["errors"] == []

    (block,) = report["capacity_blocks"]
    assert (block["required_gpus"], block["free_gpus"], block["limit"], block["status"]) == (8, 8, 16, "ok")
    assert block["id"] != BLOCK and block["id"].startswith("capacityblockgroup-…")
    assert BLOCK not in result.stdout and BLOCK not in result.stderr

    lines = {(r["name"], r["region"]): r for r in report["requirements"]}
    assert lines[("mk8s.cluster.count", REGION)]["required"] == 2
    assert lines[("mk8s.cluster.count", REGION)]["status"] == "ok"
    # Reserved GPUs come out of the block, not the (zero) on-demand quota.
    assert all(r["status"] not in ("shortfall", "missing", "error") for r in report["requirements"])
    assert_no_token(result)

    # Read-only, and read through the official client stack: every page of the allowance catalog, the
    # reserved capacity, the tenant's projects (is project `a` new?), and no mutation at all.
    pages = world.fake.calls_to("QuotaAllowanceService/List")
    assert len(pages) == len(CLI_TENANT["quotas"]) // 2 + 1
    assert {c.request.parent_id for c in pages} == {TENANT}
    assert world.fake.calls_to("CapacityBlockGroupService/List")
    assert world.fake.calls_to("ProjectService/List")
    assert not [c for c in world.fake.calls if c.method.rsplit("/", 1)[-1] in ("Create", "Delete", "Update")]
    assert {c.metadata.get("authorization") for c in world.fake.calls} == {f"Bearer {TOKEN}"}


def test_preflight_that_falls_short_exits_one_and_lists_the_shortfall(world: CliWorld) -> None:
    # Two 8-GPU nodes from a block with 8 GPUs free, and two on-demand H100 nodes where the quota is 0.
    spec = world.spec(spec_text([reserved_cluster("train", 2), on_demand_cluster("burst", 2)]))
    result = world.npa("preflight", spec)
    assert result.code == 1, result.explain()
    report = result.json()
    assert report["ok"] is False

    (block,) = report["capacity_blocks"]
    assert (block["required_gpus"], block["free_gpus"], block["status"]) == (16, 8, "rejected")
    assert block["id"].startswith("capacityblockgroup-…") and block["id"] != BLOCK
    assert BLOCK not in result.stdout and BLOCK not in result.stderr

    short = {r["name"]: r for r in report["requirements"] if r["status"] == "shortfall"}
    assert "compute.instance.gpu.h100" in short, report["requirements"]
    gpu = short["compute.instance.gpu.h100"]
    assert (gpu["required"], gpu["available"], gpu["limit"], gpu["shortfall"]) == (16, 0, 0, 16)
    # Failures sort first, so a long table never hides them.
    statuses = [r["status"] for r in report["requirements"]]
    assert statuses[: len(short)] == ["shortfall"] * len(short)
    assert_no_token(result)
    assert not [c for c in world.fake.calls if c.method.rsplit("/", 1)[-1] in ("Create", "Delete", "Update")]


def test_a_deployed_running_cluster_adds_no_preflight_demand(world: CliWorld) -> None:
    # The block is fully used, by the very cluster the spec describes: deployed and running as the spec
    # asks, it needs nothing new, so the same spec that fails before the deploy passes after it. The
    # stack's fingerprint is an older npa-pulumi's: only what decides capacity is compared.
    world.fake.capacity_blocks[BLOCK].status.usage = 16
    spec = world.spec(spec_text([reserved_cluster("train", 2)]))
    before = world.npa("preflight", spec)
    assert before.code == 1, before.explain()
    (block,) = before.json()["capacity_blocks"]
    assert (block["required_gpus"], block["free_gpus"], block["status"]) == (16, 0, "rejected")

    project_id, subnet_id = seed_project(world)
    cluster_id = seed_running_cluster(world, project_id, "train", gpu_nodes=2)
    with world.fake.lock:
        world.fake.add_gpu_cluster(project_id, "fabric-3-train", "fabric-3")  # the recipe's, on the fabric
    world.seed_stack("a", None, {"project_id": project_id, "subnet_id": subnet_id})
    older = "0" * 64  # what an older npa-pulumi (or Pulumi, or terraform) recorded
    world.seed_stack("a", "train", cluster_outputs(project_id, subnet_id, cluster_id, "train", older))

    after = world.npa("preflight", spec)
    assert after.code == 0, after.explain()
    report = after.json()
    assert report["ok"] is True and report["capacity_blocks"] == [] and report["requirements"] == []
    [deployed] = report["deployed"]
    assert (deployed["target"], deployed["charge"]) == ("a/train", "zero"), deployed
    assert BLOCK not in after.stdout
    # `unchanged` was decided from the live cluster, read through the port.
    assert [c.request.id for c in world.fake.calls_to("ClusterService/Get")] == [cluster_id]
    assert [c.request.parent_id for c in world.fake.calls_to("NodeGroupService/List")] == [cluster_id]

    # A node group that is no longer all ready makes the cluster demand again.
    for group in world.fake.node_groups.values():
        group.status.ready_node_count = 0
    again = world.npa("preflight", spec)
    assert again.code == 1, again.explain()

    # The API's preemption marker on the reserved group (`preemptible: {}`), decoded at the adapter: the
    # live group no longer matches the spec, so it is charged in full again, and the note says why.
    reserved = [
        g for g in world.fake.node_groups.values() if g.spec.template.resources.platform.startswith("gpu-")
    ]
    for group in world.fake.node_groups.values():
        group.status.ready_node_count = group.status.target_node_count
    assert world.npa("preflight", spec).code == 0
    for group in reserved:
        group.spec.template.preemptible = mk8s.PreemptibleSpec()
    marked = world.npa("preflight", spec)
    assert marked.code == 1, marked.explain()
    notes = marked.json()["notes"]
    assert any("charged in full" in n and "a reserved pool must not be preemptible" in n for n in notes), (
        notes
    )
    assert BLOCK not in marked.stdout


# ------------------------------------------------------------------------------------------ status


def test_status_of_deployed_provisioning_destroyed_and_absent_clusters(world: CliWorld) -> None:
    spec = world.spec(
        spec_text(
            [reserved_cluster("train", 1), on_demand_cluster("burst", 2), cpu_cluster("old")],
            [cpu_cluster("fresh")],
        )
    )
    project_id, subnet_id = seed_project(world)
    fake = world.fake
    with fake.lock:
        train = seed_running_cluster(world, project_id, "train", gpu_nodes=1)
        # A group that once hit a quota wall and has since got its nodes: the event is history.
        fake.add_node_group(
            train, "recovered", target=1, ready=1, quota_failure_on=("compute.instance.count", 1, 2)
        )
        burst = fake.add_cluster(project_id, "burst", subnet_id=subnet_id)
        burst_cpu = fake.add_node_group(burst, "cpu", target=1, ready=1)
        burst_gpu = fake.add_node_group(
            burst,
            "gpu",
            target=2,
            ready=0,
            state="PROVISIONING",
            platform="gpu-h100-sxm",
            preset="8gpu-128vcpu-1600gb",
            quota_failure_on=("compute.instance.gpu.h100", 0, 16),
        )
    gone = "mk8scluster-e00deletedoutside"
    for name, cluster_id in (("train", train), ("burst", burst), ("old", gone)):
        world.seed_stack("a", name, cluster_outputs(project_id, subnet_id, cluster_id, name, "f" * 64))
    # `fresh` (in the existing project) has no stack at all.

    result = world.npa("status", spec)
    document = result.json()
    clusters = {c["cluster_name"]: c for c in document["clusters"]}
    assert set(clusters) == {"train", "burst", "old", "fresh"}, result.explain()
    assert {name: c["status"] for name, c in clusters.items()} == {
        "train": "deployed",
        "burst": "provisioning",
        "old": "destroyed",
        "fresh": "absent",
    }, result.explain()
    # None of these is a failure of the status command itself.
    assert result.code == 0, result.explain()
    assert document["command"] == "status" and document["cloud"] == "nebius"

    deployed = clusters["train"]
    assert (deployed["cluster_id"], deployed["project_id"]) == (train, project_id)
    assert deployed["kube_context"] == f"nebius-{FLEET}-a-train"
    assert deployed["error"] is None
    assert deployed["validation"] == "skipped"  # a GPU cluster: the health gate did not run
    groups = {g["name"]: g for g in deployed["node_groups"]}
    assert {n: (g["state"], g["target"], g["ready"]) for n, g in groups.items()} == {
        "cpu": ("RUNNING", 1, 1),
        "gpu": ("RUNNING", 1, 1),
        "recovered": ("RUNNING", 1, 1),
    }
    assert groups["recovered"]["conditions"][0]["kind"] == "QuotaFailure"  # shown, but not an error

    waiting = clusters["burst"]
    assert waiting["error"] == (
        "node group waiting on quota compute.instance.gpu.h100: requested 16, limit 0"
    ), waiting
    groups = {g["id"]: g for g in waiting["node_groups"]}
    assert (groups[burst_cpu]["state"], groups[burst_cpu]["ready"]) == ("RUNNING", 1)
    starved = groups[burst_gpu]
    assert (starved["state"], starved["target"], starved["ready"]) == ("PROVISIONING", 2, 0)
    (condition,) = starved["conditions"]
    assert condition["kind"] == "QuotaFailure"
    assert (condition["quota"], condition["limit"], condition["requested"]) == (
        "compute.instance.gpu.h100",
        0,
        16,
    )
    assert "compute.instance.gpu.h100" in condition["message"]

    destroyed = clusters["old"]
    assert destroyed["cluster_id"] == gone and destroyed["project_id"] == project_id
    assert "deleted outside the fleet" in destroyed["error"]
    assert destroyed["node_groups"] == []

    absent = clusters["fresh"]
    assert absent["cluster_id"] is None and absent["node_groups"] == []

    # What crossed the wire: the project's clusters listed once (batched per project, not a Get per
    # cluster), node groups listed under each live cluster, all with the profile's token, nothing but reads.
    assert not fake.calls_to("ClusterService/Get")
    assert [c.request.parent_id for c in fake.calls_to("ClusterService/List")] == [project_id]
    listed = [(c.request.parent_id, c.request.page_token) for c in fake.calls_to("NodeGroupService/List")]
    # train's three groups take two pages of the fake's two.
    assert sorted(listed) == sorted([(train, ""), (train, "page:2"), (burst, "")])
    assert {c.metadata.get("authorization") for c in fake.calls} == {f"Bearer {TOKEN}"}
    assert not [c for c in fake.calls if c.method.rsplit("/", 1)[-1] in ("Create", "Delete", "Update")]
    assert_no_token(result)


def test_status_reports_a_cloud_it_cannot_read_as_a_status_error(world: CliWorld) -> None:
    spec = world.spec(spec_text([cpu_cluster("train")]))
    project_id, subnet_id = seed_project(world)
    cluster_id = seed_running_cluster(world, project_id, "train", gpu_nodes=0)
    world.seed_stack("a", "train", cluster_outputs(project_id, subnet_id, cluster_id, "train", "f" * 64))
    # Refused outright (not a transient fault): reported per cluster, exit 1, no traceback.
    world.fake.fail_next(
        "ClusterService/List", grpc.StatusCode.PERMISSION_DENIED, times=5, message="no access to the cluster"
    )

    result = world.npa("status", spec)
    assert result.code == 1, result.explain()
    (cluster,) = result.json()["clusters"]
    assert cluster["status"] == "status-error"
    assert "no access to the cluster" in cluster["error"]
    assert "Traceback" not in result.stderr
    assert len(world.fake.calls_to("ClusterService/List")) == 1  # a refusal is not retried
    assert_no_token(result)


# ------------------------------------------------------------------------------------------ helpers


def seed_project(world: CliWorld) -> tuple[str, str]:
    """Project `wire-a` with a network and subnet in the fake, as the project stack would have left it."""
    fake = world.fake
    with fake.lock:
        project_id = fake.add_project("wire-a", REGION)
    return project_id, "vpcsubnet-e00wirea"


def seed_running_cluster(world: CliWorld, project_id: str, name: str, gpu_nodes: int) -> str:
    fake = world.fake
    with fake.lock:
        cluster_id = fake.add_cluster(project_id, name, subnet_id="vpcsubnet-e00wirea")
        fake.add_node_group(cluster_id, "cpu", target=1, ready=1)
        if gpu_nodes:
            fake.add_node_group(
                cluster_id,
                "gpu",
                target=gpu_nodes,
                ready=gpu_nodes,
                platform="gpu-h100-sxm",
                preset="8gpu-128vcpu-1600gb",
                disk_gib=1023,  # what the spec's GPU pool resolves to (gpu_disk_size_gib's default)
                reservation=("STRICT", [BLOCK]),
            )
    return cluster_id


def cluster_outputs(
    project_id: str, subnet_id: str, cluster_id: str, name: str, fingerprint: str
) -> dict[str, Any]:
    return {
        "project_id": project_id,
        "subnet_id": subnet_id,
        "cluster_id": cluster_id,
        "endpoint": f"https://{cluster_id}.mk8s.test:443",
        "kube_context": f"nebius-{FLEET}-a-{name}",
        "npa_fingerprint": fingerprint,
    }


def test_status_as_a_service_account_named_by_a_credentials_file(
    world: CliWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI authenticates with a service-account credentials file, not a CLI profile. The tenant then comes
    # from the spec, and every call carries the token exchanged for the account.
    spec_path = world.spec(f"tenant_id: {TENANT}\n" + spec_text([cpu_cluster("train")]))
    project_id, subnet_id = seed_project(world)
    cluster_id = seed_running_cluster(world, project_id, "train", gpu_nodes=0)
    world.seed_stack("a", "train", cluster_outputs(project_id, subnet_id, cluster_id, "train", "f" * 64))
    credentials = world.wire.service_account_credentials(project_id, name="npa-ci")
    monkeypatch.setenv("NPA_NEBIUS_CREDENTIALS_FILE", str(credentials))

    result = world.npa("status", spec_path)
    assert result.code == 0, result.explain()
    (cluster,) = result.json()["clusters"]
    assert (cluster["status"], cluster["cluster_id"]) == ("deployed", cluster_id)
    assert len(world.fake.calls_to("TokenExchangeService/Exchange")) >= 1
    authed = [c for c in world.fake.calls if not c.method.endswith("/Exchange")]
    assert authed and all(c.metadata["authorization"].startswith("Bearer sa-token-") for c in authed)
    printed = result.stdout + result.stderr
    assert "PRIVATE KEY" not in printed
    assert not [token for token in world.fake.tokens if token in printed]


def test_a_spec_for_another_tenant_than_the_profile_is_refused_before_any_call(world: CliWorld) -> None:
    spec_path = world.spec(f"tenant_id: {OTHER_TENANT}\n" + spec_text([cpu_cluster("train")]))
    result = world.npa("preflight", spec_path)
    assert result.code == 2, result.explain()
    error = result.json()["error"]
    assert OTHER_TENANT in error["message"] and TENANT in error["message"], error
    assert "Traceback" not in result.stderr
    assert world.fake.calls == []


# ------------------------------------------------------------------------------------------ destroy


def test_destroy_needs_no_ssh_key(world: CliWorld) -> None:
    """A destroy runs no stack's program: a machine without an SSH key (none in the spec, none under
    ~/.ssh) gets past planning, while `up` on it is refused for the missing key before any call."""
    text = spec_text([cpu_cluster("train")]).replace(f'ssh_public_key: "{SSH_KEY}"\n', "")
    spec = world.spec(text)
    assert not (Path.home() / ".ssh").exists()
    project_id, subnet_id = seed_project(world)
    world.seed_stack(
        "a", "train", cluster_outputs(project_id, subnet_id, "mk8scluster-e00gone", "train", "f" * 64)
    )

    up = world.npa("up", spec, "--yes")
    assert up.code == 2 and "no SSH public key" in up.json()["error"]["message"], up.explain()

    dry = world.npa("destroy", spec, "--dry-run")
    assert dry.code == 0, dry.explain()
    phases = {(p["phase"], p["stack"]): p for p in dry.json()["phases"]}
    assert phases[("cluster", f"{FLEET}.a.train")]["status"] == "planned"
    assert "SSH" not in dry.stderr


def test_an_empty_region_comes_from_npa_config_after_the_profile(world: CliWorld) -> None:
    # A profile with no parent-id project names no region: the original tool's ~/.npa/config.yaml is read
    # next (docs/spec.md), and without it the run asks for `region`.
    wire = world.wire
    wire.write_config({"wire": wire.profile(TOKEN, wire.tenant_id, "wire")}, default="wire")
    spec = world.spec(spec_text([cpu_cluster("train")]).replace(f"region: {REGION}\n", ""))
    asked = world.npa("preflight", spec)
    assert asked.code == 2 and "set `region`" in asked.stdout + asked.stderr, asked.explain()
    config = wire.home / ".npa" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"region: {REGION}\n")
    result = world.npa("preflight", spec)
    assert result.code == 0, result.explain()
    assert {r["region"] for r in result.json()["requirements"]} == {REGION}


# ------------------------------------------------------------------------------------------- adopt


def test_adopt_proves_an_original_install_with_reads_only(world: CliWorld) -> None:
    # The original's install of a/train names a cluster that runs in the fake; its state is not one this
    # recipe would plan empty, so the proof runs to its last step (Terraform's plan) and says
    # `mismatched`. Everything before that is the live proof, and none of it writes.
    from nebius.api.nebius.common import v1 as common
    from nebius.api.nebius.vpc import v1 as vpc

    spec = world.spec(spec_text([cpu_cluster("train")]))
    project_id, subnet_id = seed_project(world)
    with world.fake.lock:
        world.fake.networks["vpcnetwork-e00wirea"] = vpc.Network(
            metadata=common.ResourceMetadata(
                id="vpcnetwork-e00wirea", parent_id=project_id, name="wire-a-net"
            ),
            status=vpc.NetworkStatus(state=vpc.NetworkStatus.State.READY),
        )
        world.fake.subnets[subnet_id] = vpc.Subnet(
            metadata=common.ResourceMetadata(id=subnet_id, parent_id=project_id, name="wire-a-subnet"),
            spec=vpc.SubnetSpec(network_id="vpcnetwork-e00wirea"),
            status=vpc.SubnetStatus(state=vpc.SubnetStatus.State.READY),
        )
    cluster_id = seed_running_cluster(world, project_id, "train", gpu_nodes=0)
    cluster_dir = world.wire.home / ".npa" / "fleet" / FLEET / "a" / "train"
    install = cluster_dir / "k8s-training"
    # The install's recipe copy (the original copies its recipe into every install): here the offline recipe
    # the wire tests plan with (tests/wire/fleet.py), whose plan over this state must create its cluster.
    # The tfvars are HCL, written as the original's renderer writes them (never npa-pulumi's renderer).
    shutil.copytree(
        RECIPE / "k8s-training", install, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*")
    )
    (install / "terraform.tfvars").write_text(
        "# Generated by `npa fleet`\n"
        'cluster_name = "train"\n'
        f'ssh_public_key = {{ key = "{SSH_KEY}" }}\n'
        "cpu_nodes_fixed_count = 1\n"
        'cpu_nodes_platform = "cpu-d3"\n'
        'cpu_nodes_preset = "4vcpu-16gb"\n'
        'cpu_disk_size = "128"\n'
        "gpu_nodes_fixed_count_per_group = 0\n"
        "gpu_node_groups = 0\n"
    )
    state = {
        "version": 4,
        "terraform_version": "1.5.7",
        "serial": 1,
        "lineage": "7b4a1c3e-0000-4000-8000-000000000001",
        "resources": [],
        "outputs": {
            "kube_cluster": {
                "value": {"id": cluster_id, "name": "train"},
                "type": ["object", {"id": "string", "name": "string"}],
            }
        },
    }
    (install / "terraform.tfstate").write_text(json.dumps(state))
    sidecar = {"tenant_id": TENANT, "project_id": project_id, "region": REGION, "subnet_id": subnet_id}
    (cluster_dir / ".npa-fleet-env.json").write_text(json.dumps(sidecar))

    result = world.npa("adopt", spec, "--dry-run")
    assert result.code == 1, result.explain()
    (entry,) = [s for s in result.json()["stacks"] if s["stack"] == f"{FLEET}.a.train"]
    assert entry["status"] == "mismatched", entry["error"]
    assert "terraform would create terraform_data.cluster" in entry["error"]
    assert [c.request.id for c in world.fake.calls_to("ClusterService/Get")] == [cluster_id]
    assert [c.request.parent_id for c in world.fake.calls_to("NodeGroupService/List")] == [cluster_id]
    assert world.fake.calls_to("ProjectService/Get") and world.fake.calls_to("SubnetService/Get")
    assert not [c for c in world.fake.calls if c.method.rsplit("/", 1)[-1] in ("Create", "Delete", "Update")]
    assert_no_token(result)
