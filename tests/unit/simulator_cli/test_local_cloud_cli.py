"""`npa-pulumi local-cloud …`: init, show, reset, faults, settings, add and the api passthrough."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from npa_pulumi.simulator import LocalSimulator
from npa_pulumi.simulator_cli.commands import local_cloud

TIGHT = Path(__file__).resolve().parents[2] / "fixtures" / "local_cloud" / "tight-tenant.yaml"
SHORT = Path(__file__).resolve().parents[3] / "examples" / "local-tenant-short.yaml"
INVENTORY_KEYS = [
    "projects", "networks", "subnets", "mk8s_clusters", "node_groups", "filesystems", "gpu_clusters",
    "buckets", "service_accounts", "access_keys", "instances", "disks", "registries", "iam_groups",
    "security_groups", "quotas", "capacity_block_groups",
]  # fmt: skip


@pytest.fixture
def cloud_dir(tmp_path: Path) -> Path:
    return tmp_path / "cloud"


def run(cloud_dir: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(local_cloud, ["--dir", str(cloud_dir), *args], input=input)


def test_the_command_is_registered_on_the_main_cli_through_its_entry_point() -> None:
    from npa_pulumi.cli.main import COMMAND_MODULES, cli, plugin_commands

    assert plugin_commands()["local-cloud"].value == "npa_pulumi.simulator_cli.commands"
    assert not any(module.startswith("npa_pulumi.simulator") for module in COMMAND_MODULES)
    assert cli.get_command(click.Context(cli), "local-cloud") is local_cloud


def test_init_seeds_and_is_idempotent(cloud_dir: Path) -> None:
    first = run(cloud_dir, "init", "--tenant-fixture", str(TIGHT), "--output", "json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["status"] == "initialised"
    again = run(cloud_dir, "init", "--tenant-fixture", str(TIGHT))
    assert again.exit_code == 0 and "already initialised" in again.stderr
    other = run(cloud_dir, "init", "--tenant-fixture", str(SHORT))
    assert other.exit_code == 1 and "--force" in other.stderr
    forced = run(cloud_dir, "init", "--tenant-fixture", str(SHORT), "--force")
    assert forced.exit_code == 0
    assert LocalSimulator(cloud_dir).settings()["fixture_source"] == str(SHORT)


def test_init_with_a_bad_fixture_is_invalid_input(cloud_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tenant_id: t\nregions: []\n")
    result = run(cloud_dir, "init", "--tenant-fixture", str(bad))
    assert result.exit_code == 2
    assert "regions" in result.stderr and "Traceback" not in result.output


def test_show_json_is_one_document_of_lists_with_usage_and_no_secrets(cloud_dir: Path) -> None:
    run(cloud_dir, "init", "--tenant-fixture", str(TIGHT))
    simulator = LocalSimulator(cloud_dir)
    account = simulator.create_service_account("project-existing1", "sa")
    secret = simulator.create_access_key("project-existing1", account["id"])["secret"]
    simulator.create_cluster("project-existing1", "c1", simulator.list_subnets("project-existing1")[0]["id"])
    result = run(cloud_dir, "show", "--output", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert list(document) == INVENTORY_KEYS
    assert all(isinstance(value, list) for value in document.values())
    assert secret not in result.stdout
    clusters = {q["name"]: q["usage"] for q in document["quotas"] if q["region"] == "us-central1"}
    assert clusters["mk8s.cluster.count"] == 1
    assert {b["id"]: b["usage"] for b in document["capacity_block_groups"]}["capacityblockgroup-local1"] == 2


def test_show_text_lists_what_exists(cloud_dir: Path) -> None:
    run(cloud_dir, "init", "--tenant-fixture", str(TIGHT))
    result = run(cloud_dir, "show")
    assert result.exit_code == 0
    assert "project-existing1" in result.stdout and "capacityblockgroup-local1" in result.stdout


def test_reset_asks_unless_yes(cloud_dir: Path) -> None:
    run(cloud_dir, "init", "--tenant-fixture", str(TIGHT))
    declined = run(cloud_dir, "reset", input="n\n")
    assert declined.exit_code == 1 and LocalSimulator(cloud_dir).is_initialised()
    accepted = run(cloud_dir, "reset", "--yes")
    assert accepted.exit_code == 0 and not LocalSimulator(cloud_dir).is_initialised()


def test_fault_commands(cloud_dir: Path) -> None:
    added = run(cloud_dir, "fault", "add", "--op", "create_project", "--error", "unavailable", "--count", "2",
                "--latency-ms", "5", "--output", "json")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["remaining"] == 2
    listed = run(cloud_dir, "fault", "list", "--output", "json")
    assert [(f["op"], f["error"], f["latency_ms"]) for f in json.loads(listed.stdout)] == [
        ("create_project", "unavailable", 5)
    ]
    assert "next 2 call(s)" in run(cloud_dir, "fault", "list").stdout
    unknown_op = run(cloud_dir, "fault", "add", "--op", "make_project", "--error", "unavailable")
    assert unknown_op.exit_code == 2 and "unknown operation" in unknown_op.stderr
    unknown_kind = run(cloud_dir, "fault", "add", "--op", "create_project", "--error", "flaky")
    assert unknown_kind.exit_code == 2
    cleared = run(cloud_dir, "fault", "clear")
    assert cleared.exit_code == 0 and "cleared 1" in cleared.stderr
    assert json.loads(run(cloud_dir, "fault", "list", "--output", "json").stdout) == []


def test_settings_can_be_changed(cloud_dir: Path) -> None:
    assert run(cloud_dir, "set", "provisioning-seconds", "2.5").exit_code == 0
    assert run(cloud_dir, "set", "wait-timeout-seconds", "7").exit_code == 0
    shown = json.loads(run(cloud_dir, "settings", "--output", "json").stdout)
    assert (shown["provisioning_seconds"], shown["wait_timeout_seconds"]) == (2.5, 7.0)
    assert run(cloud_dir, "set", "wait-timeout-seconds", "0").exit_code == 2
    assert run(cloud_dir, "set", "speed", "1").exit_code == 2
    assert run(cloud_dir, "set", "project-default-network", "2").exit_code == 2  # 0 or 1
    assert run(cloud_dir, "set", "project-default-network", "1").exit_code == 0
    shown = json.loads(run(cloud_dir, "settings", "--output", "json").stdout)
    assert shown["project_default_network"] == 1.0
    # The command `doctor` and a missing API server binary suggest: the clusters' API servers off.
    assert run(cloud_dir, "set", "kubernetes-api", "2").exit_code == 2  # 0 or 1
    assert run(cloud_dir, "set", "kubernetes-api", "0").exit_code == 0
    assert json.loads(run(cloud_dir, "settings", "--output", "json").stdout)["kubernetes_api"] == 0.0
    # SeaweedFS is the only S3 server: no setting chooses another.
    assert "seaweedfs_s3" not in json.loads(run(cloud_dir, "settings", "--output", "json").stdout)
    assert run(cloud_dir, "set", "seaweedfs-s3", "1").exit_code == 2


def test_api_passthrough_prints_one_json_document(cloud_dir: Path) -> None:
    args = json.dumps({"tenant_id": "tenant-local", "name": "via-api", "region": "us-central1"})
    created = run(cloud_dir, "api", "create_project", "--args", args)
    assert created.exit_code == 0, created.output
    project = json.loads(created.stdout)["result"]
    assert project["id"].startswith("project-e00") and project["name"] == "via-api"
    refused = run(cloud_dir, "api", "create_project", "--args", args)
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"]["kind"] == "already-exists"
    assert run(cloud_dir, "api", "no_such_operation").exit_code == 2


def test_add_puts_what_a_user_could_into_a_project(cloud_dir: Path) -> None:
    """`local-cloud add`: a VM, a disk, a registry, an IAM group or a security group in a project, for a
    teardown to find; a project made as Nebius makes one has its default network's default security group."""
    run(cloud_dir, "init", "--tenant-fixture", str(TIGHT))
    added = {}
    for kind in ("instance", "disk", "registry", "group"):
        result = run(
            cloud_dir, "add", kind, "--project", "project-existing1", "--name", f"users-{kind}", "-o", "json"
        )
        assert result.exit_code == 0, result.output
        added[kind] = json.loads(result.stdout)["result"]["id"]
    simulator = LocalSimulator(cloud_dir)
    network = simulator.list_networks("project-existing1")[0]["id"]
    sg = run(
        cloud_dir,
        *("add", "security-group", "--project", "project-existing1", "--name", "users-sg"),
        *("--network", network, "--label", "team=ml", "--output", "json"),
    )
    assert sg.exit_code == 0, sg.output
    record = json.loads(sg.stdout)["result"]
    assert (record["network_id"], record["default"], record["labels"]) == (network, False, {"team": "ml"})
    shown = json.loads(run(cloud_dir, "show", "--output", "json").stdout)
    assert [i["id"] for i in shown["instances"]] == [added["instance"]]
    assert [d["id"] for d in shown["disks"]] == [added["disk"]]
    assert [r["id"] for r in shown["registries"]] == [added["registry"]]
    assert [g["id"] for g in shown["iam_groups"]] == [added["group"]]
    assert [g["name"] for g in shown["security_groups"]] == ["users-sg"]
    # bad input: exit 2, nothing added
    no_network = run(cloud_dir, "add", "security-group", "--project", "project-existing1", "--name", "x")
    assert no_network.exit_code == 2 and "--network" in no_network.output
    assert run(cloud_dir, "add", "vm", "--project", "project-existing1", "--name", "x").exit_code == 2
    bad_label = run(cloud_dir, "add", "disk", "--project", "project-existing1", "--name", "y", "--label", "k")
    assert bad_label.exit_code == 2
    assert len(json.loads(run(cloud_dir, "show", "--output", "json").stdout)["disks"]) == 1
    # labels edited out of band, as in the console
    assert simulator.set_labels(added["disk"], {"owner": "me"})["labels"] == {"owner": "me"}

    # as on Nebius: a new project's default network comes with its default security group, which goes
    # with the network and cannot be deleted on its own; a network holding a user's group cannot go
    run(cloud_dir, "set", "project-default-network", "1")
    project = simulator.create_project("tenant-local", "with-defaults", "us-central1")["id"]
    [default] = simulator.list_security_groups(project)
    assert default["default"] and default["name"].startswith("default-security-group-")
    from npa_pulumi.cloud.errors import FailedPrecondition

    with pytest.raises(FailedPrecondition):
        simulator.delete_security_group(default["id"])
    mine = simulator.create_security_group(project, default["network_id"], "mine")["id"]
    [subnet] = simulator.list_subnets(project)
    simulator.delete_subnet(subnet["id"])
    with pytest.raises(FailedPrecondition, match="security groups"):
        simulator.delete_network(default["network_id"])
    simulator.delete_security_group(mine)
    simulator.delete_network(default["network_id"])
    assert simulator.list_security_groups(project) == []
    simulator.delete_project(project)
