"""The upstream lifecycle benchmark's pure helpers (benchmarks/upstream.py): the environment of raw
terraform on the bridge's work dir, and which processes are the cloud's (left out of the product's CPU and
its floor)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.process_costs import Breakdown, kind_of
from benchmarks.upstream import is_cloud_kind, product_cpu, raw_terraform_env


def test_raw_terraform_gets_the_identity_token_providers_and_cache_and_no_ambient_tf_setting() -> None:
    env = raw_terraform_env(
        {"PATH": "/bin", "TF_LOG": "TRACE", "TF_CLI_CONFIG_FILE": "/root/.terraformrc"},
        {"tenant_id": "tenant-a", "parent_id": "project-a", "iam_token": "tok"},
        Path("/c/local.tfrc"),
        Path("/c/plugins"),
        "/venv/bin/python",
    )
    assert env["PATH"] == "/bin" and "TF_LOG" not in env
    assert env["TF_CLI_CONFIG_FILE"] == "/c/local.tfrc" and env["TF_PLUGIN_CACHE_DIR"] == "/c/plugins"
    assert env["TF_VAR_tenant_id"] == "tenant-a" and env["TF_VAR_parent_id"] == "project-a"
    assert env["TF_VAR_iam_token"] == "tok" and env["NEBIUS_IAM_TOKEN"] == "tok"
    assert env["NPA_PYTHON"] == "/venv/bin/python" and env["TF_INPUT"] == "0"


def test_without_a_token_no_nebius_token_is_set() -> None:
    env = raw_terraform_env({}, {"tenant_id": "t"}, Path("/c"), Path("/p"), "python3")
    assert "NEBIUS_IAM_TOKEN" not in env and "TF_VAR_iam_token" not in env


def test_the_local_providers_are_the_clouds_and_terraform_and_the_engine_are_not() -> None:
    shim = kind_of(
        [
            ".terraform/providers/registry.opentofu.org/nebius/nebius/0.6.56/linux_amd64/"
            "terraform-provider-nebius_v0.6.56"
        ]
    )
    worker = kind_of(["/venv/bin/python", "-m", "npa_pulumi.simulator.tfproviders", "nebius/nebius"])
    assert is_cloud_kind(shim) and is_cloud_kind(worker)
    for argv in (["/t/terraform", "apply"], ["/t/pulumi", "up"], ["/v/python", "-m", "npa_pulumi.cli.main"]):
        assert not is_cloud_kind(kind_of(argv))
    breakdown = Breakdown(cpu_s={shim: 1.0, worker: 2.0, "terraform": 0.5}, tree_cpu_s=4.0)
    assert product_cpu(breakdown) == 1.0
