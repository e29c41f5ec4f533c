"""The pack's wiring: catalog <-> policy objects, secret handling through the SDK's real Analyze path,
the pack directory's files, and `npa-pulumi policy list`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import guardrails_testing as t
import pytest
from click.testing import CliRunner
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel, Secret, StackValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer

from npa_pulumi.cli.main import COMMAND_MODULES, cli
from npa_pulumi.policies import catalog
from npa_pulumi.policies.fleet_guardrails_lib import build_policies, build_policy_pack_kwargs
from npa_pulumi.policies.fleet_guardrails_lib.secret_marking import (
    install_secret_marking,
    secrets_visible,
    uninstall_secret_marking,
)
from npa_pulumi.policies.fleet_guardrails_lib.values import SECRET_SIG, SPECIAL_SIG_KEY, as_int, reveal

REPO = Path(__file__).resolve().parents[3]
PACK_DIR = REPO / "policies" / "fleet-guardrails"

EXPECTED = {
    "strict-capacity-reservation": "mandatory",
    "filestore-nofail-mount": "mandatory",
    "mig-version-pinning": "mandatory",
    "nvswitch-operator-acknowledged": "mandatory",
    "gpu-cluster-needs-fabric": "mandatory",
    "no-plaintext-credentials": "mandatory",
    "fleet-assets-retained": "mandatory",
    "gpu-node-group-replacement": "advisory",
    "kuberay-reviewed-template": "mandatory",
    "fleet-tags-present": "advisory",
}

FLEET_EXPECTED = {"fleet-monthly-budget": "advisory"}


def test_catalog_names_and_levels() -> None:
    assert {p.name: p.level for p in catalog.POLICIES} == EXPECTED
    assert all(p.description and p.remediation for p in catalog.POLICIES)
    assert catalog.get_policy("fleet-tags-present").kind == "stack"
    with pytest.raises(KeyError):
        catalog.get_policy("nope")


def test_catalog_is_pulumi_free() -> None:
    code = (
        "import sys, npa_pulumi.policies.catalog, npa_pulumi.cli.policy_commands;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_policy', 'grpc')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_policy_objects_follow_the_catalog() -> None:
    built = build_policies()
    assert [p.name for p in built] == list(catalog.POLICY_NAMES)
    for policy in built:
        info = catalog.get_policy(policy.name)
        assert policy.description == info.description
        assert policy.remediation_steps == info.remediation
        assert policy.enforcement_level == EnforcementLevel(info.level)
        assert isinstance(policy, StackValidationPolicy) == (info.kind == "stack")
        if info.config_schema:
            assert policy.config_schema is not None
            assert set(policy.config_schema.properties) == set(info.config_schema)
            assert "enforcementLevel" not in policy.config_schema.properties
        else:
            assert policy.config_schema is None


def test_mig_config_defaults_are_the_pins() -> None:
    defaults = catalog.get_policy("mig-version-pinning").config_defaults()
    assert defaults["gpu_operator_version"] == "v26.3.3"
    assert defaults["gpu_driver_version"] == "580.173.02"
    assert defaults["gpu_device_plugin_version"] == defaults["gpu_gfd_version"] == "v0.19.3"
    assert defaults["gpu_mig_manager_version"] == "v0.14.2"
    assert (defaults["gpu_workers"], defaults["gpu_disk_size_gib"]) == (2, 128)


def test_pack_kwargs() -> None:
    kwargs = build_policy_pack_kwargs(readme="# r")
    assert kwargs["name"] == "fleet-guardrails" and kwargs["readme"] == "# r"
    assert len(kwargs["policies"]) == len(EXPECTED)


def test_pack_directory_files() -> None:
    yaml_text = (PACK_DIR / "PulumiPolicy.yaml").read_text()
    assert re.search(r"^runtime: python$", yaml_text, re.M)
    assert "virtualenv" not in yaml_text.split("\nruntime")[1]
    requirements = (PACK_DIR / "requirements.txt").read_text()
    assert "pulumi-policy" in requirements and re.search(r"^pulumi[=<>]", requirements, re.M)
    main = (PACK_DIR / "__main__.py").read_text()
    assert "install_secret_marking()" in main and "PolicyPack(" in main
    readme = (PACK_DIR / "README.md").read_text()
    for info in catalog.POLICIES:
        assert f"`{info.name}`" in readme, info.name
        for key in info.config_schema:
            assert f"`{key}`" in readme, (info.name, key)


def test_pack_imports_from_a_plain_checkout() -> None:
    # Without npa_pulumi installed the pack falls back to the repository root on sys.path, where npa_pulumi
    # and its `policies` link are.
    code = (
        "import runpy, sys, pulumi_policy;"
        # Drop the editable install's finder so npa_pulumi.policies is not importable.
        "sys.meta_path[:] = [f for f in sys.meta_path"
        " if not getattr(f, '__module__', '').startswith('__editable__')];"
        "pulumi_policy.PolicyPack = lambda **kw: print(kw['name'], len(kw['policies']));"
        f"runpy.run_path({str(PACK_DIR)!r}, run_name='__main__');"
        "print(sorted(m for m in sys.modules if 'fleet_guardrails_lib' in m)[0])"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"}
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=False, env=env, cwd="/"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "fleet-guardrails",
        str(len(EXPECTED)),
        "npa_pulumi.policies.fleet_guardrails_lib",
    ]


# --- secrets: the SDK unwraps them, the pack's marking keeps them visible ----------------------------


@pytest.fixture
def marking() -> Iterator[None]:
    was_active = secrets_visible()
    assert install_secret_marking()
    yield
    if not was_active:
        uninstall_secret_marking()


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(props)
    return s


def _secret(value: Any) -> dict[str, Any]:
    return {SPECIAL_SIG_KEY: SECRET_SIG, "value": value}


def _analyze(
    servicer: _PolicyAnalyzerServicer, resource_type: str, props: dict[str, Any], **opts: Any
) -> list[Any]:
    request = proto.AnalyzeRequest(
        type=resource_type,
        properties=_struct(props),
        urn=f"urn:pulumi:s::p::{resource_type}::r",
        name="r",
        options=proto.AnalyzerResourceOptions(**opts),
    )
    response = servicer.Analyze(request, None)  # type: ignore[no-untyped-call]
    return list(response.diagnostics)


def _servicer() -> _PolicyAnalyzerServicer:
    return _PolicyAnalyzerServicer("fleet-guardrails", "0.1.0", build_policies(), EnforcementLevel.ADVISORY)


def test_stock_sdk_unwraps_secrets() -> None:
    import pulumi_policy.policy as policy_module

    if secrets_visible():
        uninstall_secret_marking()
    props = policy_module.deserialize_properties({"iam_token": _secret("t")})  # type: ignore[attr-defined]
    assert props == {"iam_token": "t"}  # indistinguishable from plaintext: why the pack marks secrets


def test_marking_keeps_secrets_wrapped(marking: None) -> None:
    import pulumi_policy.policy as policy_module

    # The SDK's private name that the pack patches (not exported: hence the ignores).
    props = policy_module.deserialize_properties(  # type: ignore[attr-defined]
        {"a": _secret({"b": [1, _secret("x")]}), "c": "plain"}
    )
    assert isinstance(props["a"], Secret) and props["c"] == "plain"
    value, was_secret = reveal(props["a"])
    assert was_secret and value["b"][0] == 1
    assert reveal(value["b"][1]) == ("x", True)
    # Remediation keeps the SDK's own proxying.
    assert policy_module.deserialize_properties({"a": _secret("x")}, True)["a"] == "x"  # type: ignore[attr-defined]
    assert install_secret_marking()  # idempotent


def test_analyze_path_with_marking(marking: None) -> None:
    servicer = _servicer()
    plain = _analyze(servicer, catalog.BUCKET, {"retain_on_delete": True, "iam_token": "tok-123"})
    assert [d.policyName for d in plain] == ["no-plaintext-credentials"]
    assert "tok-123" not in plain[0].message
    wrapped = _analyze(servicer, catalog.BUCKET, {"retain_on_delete": True, "iam_token": _secret("tok-123")})
    assert wrapped == []


def test_analyze_path_masks_block_ids(marking: None) -> None:
    servicer = _servicer()
    cluster_urn = f"urn:pulumi:s::p::{catalog.K8S_TRAINING_CLUSTER}::r"
    assert _analyze(servicer, catalog.K8S_TRAINING_CLUSTER, t.cluster_props(block=_secret(t.BLOCK_ID))) == []
    props = t.module_props(
        tfvars=t.reserved_tfvars(), runtime_tfvars=_secret(t.reservation(block="capacityblockgroup-x9"))
    )
    diagnostics = _analyze(servicer, catalog.TERRAFORM_MODULE, props, parent=cluster_urn)
    assert [d.policyName for d in diagnostics] == ["strict-capacity-reservation"]
    assert "different capacity block" in diagnostics[0].message
    assert t.BLOCK_ID not in diagnostics[0].message and "capacityblockgroup-x9" not in diagnostics[0].message


def test_json_numbers_arrive_as_floats() -> None:
    # protobuf Struct carries every number as a double; counts must still compare as integers.
    assert as_int(2.0) == 2 and as_int("128") == 128 and as_int(True) is None and as_int(2.5) is None


# --- CLI -----------------------------------------------------------------------------------------


def test_policy_list_is_registered() -> None:
    assert "npa_pulumi.cli.policy_commands" in COMMAND_MODULES


def test_policy_list_text() -> None:
    result = CliRunner().invoke(cli, ["policy", "list"])
    assert result.exit_code == 0, result.output
    for name, level in {**EXPECTED, **FLEET_EXPECTED}.items():
        assert re.search(rf"^{re.escape(name)}\s+{level}\s", result.output, re.M), name


def test_policy_list_json() -> None:
    result = CliRunner().invoke(cli, ["policy", "list", "--output", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["pack"] == "fleet-guardrails"
    # The pack's policies, then the fleet-wide ones npa-pulumi judges itself (plan/budget.py).
    assert {p["name"]: p["level"] for p in document["policies"]} == {**EXPECTED, **FLEET_EXPECTED}
    budget = next(p for p in document["policies"] if p["name"] == "fleet-monthly-budget")
    assert budget["kind"] == "fleet" and "monthly_increase_limit_usd" in budget["config_schema"]
    mig = next(p for p in document["policies"] if p["name"] == "mig-version-pinning")
    assert mig["config_schema"]["gpu_driver_version"]["default"] == "580.173.02"
