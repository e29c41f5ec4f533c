"""The fleet-guardrails pack on the real engine.

For every policy, a `preview` of a deliberately violating inline program — built directly from stand-ins
with the contract's type tokens (tests/guardrails_testing.py), bypassing the spec validator — fails with
that policy's name, and the compliant twin passes. The advisory stack policy warns without failing, and
the policy config file changes levels and settings.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import guardrails_testing as t
import pulumi
import pytest
from pulumi import automation as auto

from npa_pulumi.engine.automation.workspace import engine_env
from npa_pulumi.runtime.toolchain import find_pulumi

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "policies" / "fleet-guardrails"
PROJECT = "npa-policy-tests"
CLUSTER_TAGS = {"npa:fleet": "f1", "npa:project": "p1", "npa:kind": "cluster", "npa:cluster": "c1"}
MANDATORY = {
    "strict-capacity-reservation",
    "filestore-nofail-mount",
    "mig-version-pinning",
    "nvswitch-operator-acknowledged",
    "gpu-cluster-needs-fabric",
    "no-plaintext-credentials",
    "fleet-assets-retained",
}


@dataclass
class Fleet:
    """One cluster stack's worth of stand-ins; every field is compliant until a test changes it."""

    cluster: dict[str, Any] = field(default_factory=lambda: t.cluster_props(block="$BLOCK"))
    tfvars: dict[str, Any] = field(default_factory=t.reserved_tfvars)
    runtime: dict[str, Any] = field(default_factory=t.reservation)
    facts: dict[str, Any] = field(default_factory=t.recipe_facts)
    bucket: dict[str, Any] = field(default_factory=lambda: {"name": "b1", "retain_on_delete": True})
    # Extra bucket props built inside the program (pulumi Outputs only exist in a running program).
    bucket_extra: Callable[[], dict[str, Any]] = dict
    access_key_secret_outputs: tuple[str, ...] = ("secret",)

    def program(self) -> Callable[[], None]:
        def program() -> None:
            cluster = dict(self.cluster)
            if cluster["capacity_block_group"] == "$BLOCK":
                cluster["capacity_block_group"] = t.BLOCK_ID
            # As the contract says: the block id and the runtime variables only ever travel as secrets.
            cluster["capacity_block_group"] = pulumi.Output.secret(cluster["capacity_block_group"])
            parent = t.K8sTrainingCluster("c1", cluster)
            t.TerraformModule(
                "c1-k8s-training",
                t.module_props(
                    tfvars=self.tfvars, runtime_tfvars=pulumi.Output.secret(self.runtime), facts=self.facts
                ),
                pulumi.ResourceOptions(parent=parent),
            )
            t.Project("p1", {"name": "p1", "retain_on_delete": True})
            t.Bucket("b1", {**self.bucket, **self.bucket_extra()})
            t.AccessKey(
                "k1",
                {"service_account_id": "sa-1"},
                pulumi.ResourceOptions(additional_secret_outputs=list(self.access_key_secret_outputs)),
            )

        return program


@dataclass
class Outcome:
    ok: bool
    output: str
    violations: list[tuple[str, str, str]]  # (policy, enforcement level, message)
    stack: auto.Stack

    def policies(self, level: str | None = None) -> set[str]:
        return {p for p, lvl, _ in self.violations if level is None or lvl == level}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    find_pulumi()  # fails loudly (ToolchainMissing) when the engine is absent: this module needs it
    root = tmp_path_factory.mktemp("policy-engine")
    passphrase = root / "passphrase"
    passphrase.write_text(secrets.token_urlsafe(24))
    passphrase.chmod(0o600)
    (root / "state").mkdir()
    return {
        **engine_env(),
        "PULUMI_BACKEND_URL": f"file://{root / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
        "PULUMI_HOME": str(root / "pulumi-home"),
        # The engine's provider host unpickles the stand-ins' providers by module reference.
        "PYTHONPATH": str(REPO / "tests"),
    }


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], str]:
    root = tmp_path_factory.mktemp("policy-configs")
    count = iter(range(1000))

    def write(config: dict[str, Any]) -> str:
        path = root / f"config-{next(count)}.json"
        path.write_text(json.dumps(config))
        return str(path)

    return write


def _stack(engine: dict[str, str], name: str, fleet: Fleet, tags: dict[str, str] | None) -> auto.Stack:
    # The workspace beside the engine's home, not a new /tmp/automation-* directory per stack left behind.
    workspace = Path(engine["PULUMI_HOME"]).parent / "workspace"
    workspace.mkdir(exist_ok=True)
    stack = auto.create_or_select_stack(
        name,
        project_name=PROJECT,
        program=fleet.program(),
        opts=auto.LocalWorkspaceOptions(
            work_dir=str(workspace),
            env_vars=engine,
            pulumi_command=auto.PulumiCommand(root=str(find_pulumi().parent.parent), skip_version_check=True),
        ),
    )
    for key, value in (tags or {}).items():
        stack.set_tag(key, value)
    return stack


_names: Iterator[int] = iter(range(10_000))


def run(
    engine: dict[str, str],
    fleet: Fleet,
    *,
    config: str | None = None,
    tags: dict[str, str] | None = CLUSTER_TAGS,
    op: str = "preview",
) -> Outcome:
    stack = _stack(engine, f"s{next(_names)}", fleet, tags)
    violations: list[tuple[str, str, str]] = []

    def on_event(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            p = event.policy_event
            violations.append((p.policy_name, p.enforcement_level, p.message))

    kwargs: dict[str, Any] = {"policy_packs": [str(PACK)], "on_event": on_event}
    if config:
        kwargs["policy_pack_configs"] = [config]
    try:
        result = getattr(stack, op)(**kwargs)
    except auto.CommandError as err:
        return Outcome(False, str(err), violations, stack)
    return Outcome(True, result.stdout, violations, stack)


def assert_fails_with(outcome: Outcome, policy: str) -> str:
    assert not outcome.ok, outcome.output
    assert policy in outcome.output
    # Exactly the policy under test is violated at the mandatory level: the twins differ in one thing.
    assert outcome.policies("mandatory") == {policy}, outcome.violations
    message = next(m for p, _, m in outcome.violations if p == policy)
    assert "Remediation:" in message
    assert t.BLOCK_ID not in outcome.output
    return message


def assert_passes(outcome: Outcome) -> None:
    assert outcome.ok, outcome.output
    assert outcome.policies("mandatory") == set(), outcome.violations
    # The pack really ran (the engine lists the packs it applied).
    assert "fleet-guardrails@v0.1.0" in outcome.output


def _mig(driver: str = "580.173.02") -> Fleet:
    return Fleet(
        cluster=t.cluster_props(block="$BLOCK", gpu_driver_mode="operator", mig_enabled=True),
        tfvars=t.mig_tfvars() | {"gpu_driver_version": driver},
    )


def _nvswitch(acknowledged: bool) -> Fleet:
    tfvars = t.base_tfvars() | {
        "gpu_nodes_preset": "8gpu-128vcpu-1600gb",
        "gpu_nodes_driverfull_image": False,
    }
    tfvars.pop("gpu_nodes_driver_preset")
    cluster = t.cluster_props(
        gpu_driver_mode="operator", nvswitch_topology=True, allow_unsafe_nvswitch_operator=acknowledged
    )
    return Fleet(cluster=cluster, tfvars=tfvars, runtime={})


def _fabric(fabric: str) -> Fleet:
    tfvars = t.fabric_tfvars(fabric)
    if not fabric:
        tfvars.pop("infiniband_fabric")
    return Fleet(cluster=t.cluster_props(), tfvars=tfvars, runtime={})


def _facts_without_nofail() -> dict[str, Any]:
    facts = t.recipe_facts()
    facts["filesystem_mount"]["options"] = "defaults"
    return facts


# (policy, violating fleet, compliant twin)
CASES: list[tuple[str, Callable[[], Fleet], Callable[[], Fleet]]] = [
    ("strict-capacity-reservation", lambda: Fleet(runtime=t.reservation(policy="AUTO")), Fleet),
    ("filestore-nofail-mount", lambda: Fleet(facts=_facts_without_nofail()), Fleet),
    ("mig-version-pinning", lambda: _mig(driver="570.86.15"), _mig),
    ("nvswitch-operator-acknowledged", lambda: _nvswitch(False), lambda: _nvswitch(True)),
    ("gpu-cluster-needs-fabric", lambda: _fabric(""), lambda: _fabric("fabric-3")),
    ("no-plaintext-credentials", lambda: Fleet(access_key_secret_outputs=()), Fleet),
    ("fleet-assets-retained", lambda: Fleet(bucket={"name": "b1", "retain_on_delete": False}), Fleet),
]


@pytest.mark.parametrize(("policy", "violating", "compliant"), CASES, ids=[c[0] for c in CASES])
def test_violating_preview_fails_and_compliant_twin_passes(
    engine: dict[str, str], policy: str, violating: Callable[[], Fleet], compliant: Callable[[], Fleet]
) -> None:
    assert_fails_with(run(engine, violating()), policy)
    assert_passes(run(engine, compliant()))


def test_plaintext_token_property_fails_and_its_secret_twin_passes(engine: dict[str, str]) -> None:
    # The pack sees secrets as secrets (the stock SDK would unwrap them): same value, opposite verdicts.
    plain = Fleet(bucket={"name": "b1", "retain_on_delete": True, "session_token": "tok-plain-123"})
    message = assert_fails_with(run(engine, plain), "no-plaintext-credentials")
    assert "`session_token`" in message and "tok-plain-123" not in message
    secret = Fleet(bucket_extra=lambda: {"session_token": pulumi.Output.secret("tok-plain-123")})
    assert_passes(run(engine, secret))


def test_advisory_stack_policy_warns_without_failing(engine: dict[str, str]) -> None:
    outcome = run(engine, Fleet(), tags={"npa:fleet": "f1"})
    assert outcome.ok, outcome.output
    assert outcome.policies() == {"fleet-tags-present"}
    assert outcome.policies("advisory") == {"fleet-tags-present"}
    message = outcome.violations[0][2]
    assert "npa:project, npa:kind, npa:cluster" in message


def test_config_raises_the_advisory_policy_to_mandatory(
    engine: dict[str, str], configs: Callable[[dict[str, Any]], str]
) -> None:
    config = configs({"fleet-tags-present": "mandatory"})
    assert_fails_with(run(engine, Fleet(), tags={"npa:fleet": "f1"}, config=config), "fleet-tags-present")


def test_config_lowers_a_mandatory_policy_to_advisory(
    engine: dict[str, str], configs: Callable[[dict[str, Any]], str]
) -> None:
    violating = Fleet(facts=_facts_without_nofail())
    outcome = run(engine, violating, config=configs({"filestore-nofail-mount": "advisory"}))
    assert outcome.ok, outcome.output
    assert outcome.policies("advisory") == {"filestore-nofail-mount"}
    assert outcome.policies("mandatory") == set()


def test_config_all_disabled_silences_every_policy(
    engine: dict[str, str], configs: Callable[[dict[str, Any]], str]
) -> None:
    violating = Fleet(facts=_facts_without_nofail(), bucket={"name": "b1", "retain_on_delete": False})
    outcome = run(engine, violating, tags=None, config=configs({"all": "disabled"}))
    assert outcome.ok, outcome.output
    assert outcome.violations == []


def test_config_settings_reach_the_policy(
    engine: dict[str, str], configs: Callable[[dict[str, Any]], str]
) -> None:
    stricter = configs({"filestore-nofail-mount": {"required_mount_options": ["nofail", "noatime"]}})
    message = assert_fails_with(run(engine, Fleet(), config=stricter), "filestore-nofail-mount")
    assert "lack `noatime`" in message
    pins = configs(
        {"mig-version-pinning": {"enforcementLevel": "mandatory", "gpu_driver_version": "570.86.15"}}
    )
    assert_passes(run(engine, _mig(driver="570.86.15"), config=pins))


def test_config_is_validated_against_the_schema(
    engine: dict[str, str], configs: Callable[[dict[str, Any]], str]
) -> None:
    outcome = run(engine, Fleet(), config=configs({"mig-version-pinning": {"gpu_workers": "two"}}))
    assert not outcome.ok
    assert "mig-version-pinning" in outcome.output and "gpu_workers" in outcome.output


def test_mandatory_violation_stops_up_before_any_resource_changes(engine: dict[str, str]) -> None:
    blocked = run(engine, Fleet(runtime=t.reservation(policy="AUTO")), op="up")
    assert not blocked.ok
    assert blocked.policies("mandatory") == {"strict-capacity-reservation"}
    assert "npa:TerraformModule" not in json.dumps(blocked.stack.export_stack().deployment or {})
    # The compliant twin deploys (the stand-ins' provider really runs in the engine's provider host).
    done = run(engine, Fleet(), op="up")
    assert done.ok, done.output
    assert "npa:TerraformModule" in json.dumps(done.stack.export_stack().deployment or {})
