"""The original `npa fleet`'s rules that npa-pulumi had missed (issue 57 item 4): each refused with its exact
spec path and a YAML line, and each accepted on its valid side. The facts are the original's spec and
desired-state validation (docs/adoption.md, "Differences from npa fleet")."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from npa_pulumi.plan.soperator import render_tfvars as render_soperator_tfvars
from npa_pulumi.spec import FleetSpec, SpecError, SpecProblem, parse_spec

C = "projects[0].clusters[0]"
S = f"{C}.soperator"
CPU = {"count": 1, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
WORKER = {"name": "cpu", "platform": "cpu-d3", "preset": "16vcpu-64gb", "size": 2}
GPU_WORKER = {"name": "gpu", "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb", "fabric": "f"}
# An ed25519 public key record as ssh-keygen writes it: type, base64 of (len, type, len, 32 key bytes).
_BLOB = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))).decode()
KEY = f"ssh-ed25519 {_BLOB} ops@example"


def fleet(cluster: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "npa.fleet/v0.0.1",
        "name": "f",
        "region": "eu-north1",
        "projects": [{"name": "p", "clusters": [cluster]}],
    }


def slurm(**payload: Any) -> dict[str, Any]:
    return {"name": "slurm", "backend": "soperator", "soperator": {"workers": [WORKER], **payload}}


def parse(doc: dict[str, Any]) -> FleetSpec:
    return parse_spec(json.dumps(doc, indent=1), "spec.yaml")  # JSON is YAML; indent gives each key a line


def problems(doc: dict[str, Any]) -> list[SpecProblem]:
    with pytest.raises(SpecError) as caught:
        parse(doc)
    return caught.value.problems


REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    # soperator: the operator version contract
    (
        "operator-4.1.0",
        slurm(slurm_operator_version="4.1.0"),
        f"{S}.slurm_operator_version",
        "not a verified",
    ),
    (
        "operator-4.2.0",
        slurm(slurm_operator_version="4.2.0"),
        f"{S}.slurm_operator_version",
        "not a verified",
    ),
    ("operator-latest", slurm(slurm_operator_version="latest"), f"{S}.slurm_operator_version", "semantic"),
    (
        "operator-4.1.7-unconfined",
        slurm(slurm_operator_version="4.1.7"),
        f"{S}.use_default_apparmor_profile",
        "requires use_default_apparmor_profile: true",
    ),
    # REST API only with accounting
    (
        "rest-without-accounting",
        slurm(slurm_rest_enabled=True),
        f"{S}.slurm_rest_enabled",
        "accounting: true",
    ),
    # SSH key rules
    (
        "ssh-both-fields",
        slurm(root_login_ssh_public_key=KEY, ssh_public_keys=[KEY]),
        f"{S}.ssh_public_keys",
        "set only root_login_ssh_public_key",
    ),
    ("ssh-two-keys", slurm(ssh_public_keys=[KEY, KEY]), f"{S}.ssh_public_keys[1]", "exactly one"),
    ("ssh-not-a-key", slurm(root_login_ssh_public_key="hello"), f"{S}.root_login_ssh_public_key", "key type"),
    (
        "ssh-unknown-type",
        slurm(root_login_ssh_public_key=f"ssh-dss {_BLOB}"),
        f"{S}.root_login_ssh_public_key",
        "key type",
    ),
    (
        "ssh-bad-base64",
        slurm(root_login_ssh_public_key="ssh-ed25519 not*base64"),
        f"{S}.root_login_ssh_public_key",
        "invalid base64",
    ),
    (
        "ssh-two-lines",
        slurm(root_login_ssh_public_key=f"{KEY}\n{KEY}"),
        f"{S}.root_login_ssh_public_key",
        "exactly one",
    ),
    ("ssh-legacy-alias-checked", slurm(ssh_public_keys=["ssh-rsa"]), f"{S}.ssh_public_keys[0]", "key type"),
    # the control-plane preset minimum
    (
        "system-below-tier",
        slurm(control_plane={"system": {"preset": "8vcpu-32gb"}}),
        f"{S}.control_plane.system.preset",
        "needs at least 16vcpu-64gb",
    ),
    (
        "controller-below-tier",
        slurm(control_plane={"controller": {"preset": "4vcpu-16gb"}}),
        f"{S}.control_plane.controller.preset",
        "too small",
    ),
    (
        "system-below-tier-l",
        slurm(workers=[{**WORKER, "size": 600}], control_plane={"system": {"preset": "16vcpu-64gb"}}),
        f"{S}.control_plane.system.preset",
        "sizing tier L: system needs at least 32vcpu-128gb",
    ),
    (
        "accounting-below-tier",
        slurm(accounting=True, control_plane={"accounting": {"preset": "4vcpu-16gb"}}),
        f"{S}.control_plane.accounting.preset",
        "too small",
    ),
    (
        "role-preset-not-cpu-d3",
        slurm(control_plane={"login": {"preset": "big"}}),
        f"{S}.control_plane.login.preset",
        "not a supported cpu-d3 preset",
    ),
    # reservation selectors
    (
        "cbg-id-and-name",
        slurm(workers=[{**GPU_WORKER, "capacity_block_group": "cbg", "capacity_block_group_name": "n"}]),
        f"{S}.workers[0].capacity_block_group_name",
        "only one of",
    ),
    (
        "cbg-name-on-cpu",
        slurm(workers=[{**WORKER, "capacity_block_group_name": "n"}]),
        f"{S}.workers[0].capacity_block_group_name",
        "only valid for GPU worker pools",
    ),
    (
        "cbg-name-preemptible",
        slurm(workers=[{**GPU_WORKER, "capacity_block_group_name": "n", "preemptible": True}]),
        f"{S}.workers[0].preemptible",
        "cannot also be preemptible",
    ),
    # empty versions
    (
        "empty-node-group-version",
        slurm(node_group_version=""),
        f"{S}.node_group_version",
        "must not be empty",
    ),
    ("empty-k8s-version", slurm(k8s_version=" "), f"{S}.k8s_version", "must not be empty"),
    # mk8s pools
    ("cpu-pool-no-preset", {"cpu_nodes": {"count": 2}}, f"{C}.cpu_nodes.preset", "2 node(s) but no preset"),
    (
        "gpu-pool-no-preset",
        {"cpu_nodes": CPU, "gpu_nodes": {"count": 1, "platform": "gpu-h100-sxm"}},
        f"{C}.gpu_nodes.preset",
        "1 node(s) but no preset",
    ),
    (
        "cpu-pool-on-gpu-platform",
        {"cpu_nodes": {**CPU, "platform": "gpu-h100-sxm"}},
        f"{C}.cpu_nodes.platform",
        "cannot use a GPU platform",
    ),
    # Deliberate differences: the original coerces with int() (true -> 1 node, 2.5 -> 2 nodes).
    ("count-true", {"cpu_nodes": {**CPU, "count": True}}, f"{C}.cpu_nodes.count", "not a boolean"),
    ("count-2.5", {"cpu_nodes": {**CPU, "count": 2.5}}, f"{C}.cpu_nodes.count", "must be an integer"),
]


@pytest.mark.parametrize(
    ("cluster", "path", "fragment"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_refused_with_its_path_and_line(cluster: dict[str, Any], path: str, fragment: str) -> None:
    found = problems(fleet(cluster))
    assert [p for p in found if p.path == path and fragment in p.message], [
        (p.path, p.message) for p in found
    ]
    assert all(p.line is not None for p in found), "every problem carries its YAML line"


def test_a_refused_ssh_key_is_never_echoed() -> None:
    secretish = "ssh-ed25519 c2VjcmV0LWtleS1tYXRlcmlhbA*"
    found = problems(fleet(slurm(root_login_ssh_public_key=secretish)))
    assert all(secretish not in f"{p.message} {p.hint}" for p in found)


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("operator-default", slurm()),
    ("operator-4.1.6", slurm(slurm_operator_version="4.1.6")),
    ("operator-4.1.7-apparmor", slurm(slurm_operator_version="4.1.7", use_default_apparmor_profile=True)),
    ("operator-4.1.6-apparmor", slurm(slurm_operator_version="4.1.6", use_default_apparmor_profile=True)),
    ("rest-with-accounting", slurm(slurm_rest_enabled=True, accounting=True)),
    ("ssh-root-key", slurm(root_login_ssh_public_key=KEY)),
    ("ssh-legacy-one-key", slurm(ssh_public_keys=[KEY])),
    ("system-at-tier", slurm(control_plane={"system": {"preset": "16vcpu-64gb"}})),
    ("system-above-tier", slurm(control_plane={"system": {"preset": "64vcpu-256gb"}})),
    # accounting's preset is checked only when accounting is on (the original's rule)
    ("accounting-off-preset-unchecked", slurm(control_plane={"accounting": {"preset": "4vcpu-16gb"}})),
    ("cbg-name-on-gpu", slurm(workers=[{**GPU_WORKER, "capacity_block_group_name": "n"}])),
    ("versions-given", slurm(k8s_version="1.34", node_group_version="72")),
    ("mk8s-empty-pool", {"cpu_nodes": CPU, "gpu_nodes": {"count": 0}}),
    (
        "mk8s-pools-named",
        {
            "cpu_nodes": CPU,
            "gpu_nodes": {"count": 1, "platform": "gpu-h100-sxm", "preset": "1gpu-16vcpu-200gb"},
        },
    ),
    ("rtx-profile-fills-the-pool", {"gpu_workload_profile": "rtx-rendering", "gpu_nodes": {"count": 1}}),
    ("count-integral-float", {"cpu_nodes": {**CPU, "count": 2.0}}),
]


@pytest.mark.parametrize("cluster", [a[1] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_accepted(cluster: dict[str, Any]) -> None:
    assert len(parse(fleet(cluster)).projects[0].clusters) == 1


def test_the_default_operator_version_is_the_verified_unconfined_one() -> None:
    payload = parse(fleet(slurm())).projects[0].clusters[0].soperator
    assert payload is not None and payload.slurm_operator_version == "4.1.6"


@pytest.mark.parametrize(
    ("workers", "system", "controller"),
    [
        (2, "16vcpu-64gb", "16vcpu-64gb"),
        (600, "32vcpu-128gb", "16vcpu-64gb"),
        (2500, "64vcpu-256gb", "16vcpu-64gb"),
    ],
)
def test_an_omitted_role_preset_renders_the_tiers_minimum(workers: int, system: str, controller: str) -> None:
    payload = parse(fleet(slurm(workers=[{**WORKER, "size": workers}]))).projects[0].clusters[0].soperator
    assert payload is not None
    tfvars = render_soperator_tfvars("slurm", payload, [KEY])
    assert tfvars["slurm_nodeset_system"]["resource"]["preset"] == system
    assert tfvars["slurm_nodeset_controller"]["resource"]["preset"] == controller
