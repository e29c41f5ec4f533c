"""Reading the original `npa fleet`'s install directories for `adopt` (npa_pulumi/bridge/original_install.py):
where the state is, the identity from the sidecar or the state, the project directory match, the tfvars
comparison with its masking, and a clear refusal naming the path for what cannot be read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.bridge.original_install import (
    OriginalInstallError,
    project_directory,
    read_install,
    tfvars_mismatches,
)


def _state(**attributes: Any) -> dict[str, Any]:
    return {
        "version": 4,
        "serial": 7,
        "lineage": "l-1",
        "outputs": {
            "cluster_id": {"value": "mk8scluster-e00abc"},
            "node_group_ids": {"value": ["mk8snodegroup-e001", "mk8snodegroup-e002"]},
        },
        "resources": [
            {
                "type": "terraform_data",
                "name": "gpu_cluster",
                "instances": [{"attributes": {"region": "eu-x"}}],
            },
            {
                "type": "terraform_data",
                "name": "cluster",
                "instances": [{"attributes": {"triggers_replace": {"value": attributes}}}],
            },
        ],
    }


def _install(root: Path, state: dict[str, Any] | str, *, nested: bool = True, sidecar: Any = None) -> Path:
    cluster_dir = root / "alpha" / "train"
    terraform_dir = cluster_dir / "k8s-training" if nested else cluster_dir
    terraform_dir.mkdir(parents=True)
    (terraform_dir / "terraform.tfstate").write_text(state if isinstance(state, str) else json.dumps(state))
    (terraform_dir / "terraform.tfvars.json").write_text(json.dumps({"cpu_nodes_fixed_count": 1}))
    if sidecar is not None:
        (cluster_dir / ".npa-fleet-env.json").write_text(json.dumps(sidecar))
    return cluster_dir


IDENTITY = {
    "tenant_id": "tenant-a",
    "project_id": "project-1",
    "region": "us-central1",
    "subnet_id": "vpcsubnet-1",
}


def test_identity_from_the_state_without_a_sidecar(tmp_path: Path) -> None:
    install = read_install(_install(tmp_path, _state(**IDENTITY)))
    assert install.terraform_dir.name == "k8s-training"
    assert install.cluster_id == "mk8scluster-e00abc"
    assert install.node_group_ids == ("mk8snodegroup-e001", "mk8snodegroup-e002")
    assert vars(install.identity) == IDENTITY  # not the gpu_cluster's region
    assert install.sidecar is None and install.status == ""
    assert install.tfvars == {"cpu_nodes_fixed_count": 1}
    assert len(install.digests) == 2 and all(len(d) == 64 for d in install.digests.values())


def test_the_sidecar_wins_and_a_state_in_the_cluster_directory_is_found(tmp_path: Path) -> None:
    sidecar = {**IDENTITY, "subnet_id": "vpcsubnet-2", "status": "deployed", "profile": "prod"}
    install = read_install(_install(tmp_path, _state(**IDENTITY), nested=False, sidecar=sidecar))
    assert install.terraform_dir.name == "train"
    assert install.identity.subnet_id == "vpcsubnet-2"
    assert (install.status, install.profile) == ("deployed", "prod")
    assert len(install.digests) == 3


def test_network_ownership_comes_from_the_project_record(tmp_path: Path) -> None:
    cluster_dir = _install(tmp_path, _state(**IDENTITY))
    (cluster_dir.parent / ".npa-fleet-network.json").write_text(
        json.dumps({"created_network_id": "vpcnet-1"})
    )
    install = read_install(cluster_dir)
    assert install.subnet_owned("vpcnet-1") and not install.subnet_owned("vpcnet-2")
    bare = read_install(_install(tmp_path / "other", _state(**IDENTITY)))
    assert not bare.subnet_owned("vpcnet-1")


def test_bucket_ownership_comes_from_the_project_storage_record(tmp_path: Path) -> None:
    cluster_dir = _install(tmp_path, _state(**IDENTITY))
    record = {"bucket_id": "storagebucket-1", "bucket_name": "npa-fleet-abc", "created": True}
    (cluster_dir.parent / ".npa-fleet-object-storage.json").write_text(json.dumps(record))
    install = read_install(cluster_dir)
    assert install.recorded_bucket == ("storagebucket-1", "npa-fleet-abc")
    assert install.bucket_created("storagebucket-1") and not install.bucket_created("storagebucket-2")
    assert len(install.digests) == 3  # the record is among the files read
    reused = {"bucket": {"id": "storagebucket-1", "name": "npa-fleet-abc"}, "created": False}
    (cluster_dir.parent / ".npa-fleet-object-storage.json").write_text(json.dumps(reused))
    assert read_install(cluster_dir).recorded_bucket == ("storagebucket-1", "npa-fleet-abc")
    assert not read_install(cluster_dir).bucket_created("storagebucket-1")  # it existed before the original
    bare = read_install(_install(tmp_path / "other", _state(**IDENTITY)))
    assert bare.recorded_bucket == ("", "") and not bare.bucket_created("")


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "a JSON object was expected"),
        (json.dumps({"version": 4}), "not a Terraform state"),
        (json.dumps({"serial": 1, "resources": [], "outputs": {}}), "records no cluster"),
    ],
)
def test_an_unreadable_state_is_refused_with_its_path(tmp_path: Path, state: str, message: str) -> None:
    cluster_dir = _install(tmp_path, state)
    with pytest.raises(OriginalInstallError) as caught:
        read_install(cluster_dir)
    assert message in str(caught.value)
    assert str(cluster_dir / "k8s-training" / "terraform.tfstate") in str(caught.value)
    assert caught.value.exit_code == 2


def test_missing_state_and_missing_identity(tmp_path: Path) -> None:
    empty = tmp_path / "alpha" / "train"
    empty.mkdir(parents=True)
    with pytest.raises(OriginalInstallError, match="no Terraform state"):
        read_install(empty)
    no_subnet = {k: v for k, v in IDENTITY.items() if k != "subnet_id"}
    with pytest.raises(OriginalInstallError, match="subnet_id"):
        read_install(_install(tmp_path / "b", _state(**no_subnet)))


def test_project_directory_by_key_display_name_or_id(tmp_path: Path) -> None:
    (tmp_path / "lc-alpha").mkdir()
    (tmp_path / "project-9").mkdir()
    assert project_directory(tmp_path, "alpha", "lc-alpha", None) == tmp_path / "lc-alpha"
    assert project_directory(tmp_path, "beta", "beta", "project-9") == tmp_path / "project-9"
    assert project_directory(tmp_path, "gamma", "gamma", None) is None
    (tmp_path / "alpha").mkdir()
    assert project_directory(tmp_path, "alpha", "lc-alpha", None) == tmp_path / "alpha"  # the key first


def test_tfvars_mismatches_key_by_key_with_secrets_masked() -> None:
    saved = {
        "a": 1,
        "ssh_public_key": "ssh-ed25519 AAAA",
        "only_saved": True,
        "block": "capacityblockgroup-e00abcdef1234",
    }
    wanted = {
        "a": 2,
        "ssh_public_key": "ssh-ed25519 BBBB",
        "only_wanted": "x",
        "block": "capacityblockgroup-e00abcdef1234",
    }
    found = tfvars_mismatches(saved, wanted)
    assert found == [
        "a: saved 1, the spec renders 2",
        "only_saved: saved true, the spec renders none",
        'only_wanted: the spec renders "x", the saved tfvars have none',
        "ssh_public_key: saved (secret), the spec renders (secret)",
    ]
    assert tfvars_mismatches(wanted, wanted) == []
    shown = tfvars_mismatches({"b": "capacityblockgroup-e00abcdef1234"}, {"b": "capacityblockgroup-e00ffff"})
    assert "abcdef1234" not in shown[0] and "capacityblockgroup-" in shown[0]
