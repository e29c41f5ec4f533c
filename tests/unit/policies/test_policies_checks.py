"""Every fleet-guardrails policy against hand-built validation args: compliant props pass, each kind of
violation is reported with the policy's remediation hint, and no capacity-block id ever leaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import guardrails_testing as t
import pytest
from pulumi_policy import Secret

from npa_pulumi.policies import catalog
from npa_pulumi.policies.fleet_guardrails_lib import build_policies
from npa_pulumi.policies.fleet_guardrails_lib.facts import ClusterRegistry

TF = catalog.TERRAFORM_MODULE
CLUSTER = catalog.K8S_TRAINING_CLUSTER
CLUSTER_URN = "urn:pulumi:s::p::npa:fleet:K8sTrainingCluster::c1"
OTHER_BLOCK = "capacityblockgroup-e00otherblock0077"


def policies(secrets_visible: bool = True) -> dict[str, Any]:
    return {p.name: p for p in build_policies(ClusterRegistry(), secrets_visible=secrets_visible)}


def remediation(name: str) -> str:
    return catalog.get_policy(name).remediation


def assert_clean(messages: list[str]) -> None:
    assert messages == []


def assert_violation(name: str, messages: list[str], *fragments: str) -> str:
    assert len(messages) == 1, messages
    message = messages[0]
    assert f"Remediation: {remediation(name)}" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    # Never echo a capacity block id, in any policy's message.
    assert t.BLOCK_ID not in message and OTHER_BLOCK not in message
    return message


def run_module(
    name: str,
    props: dict[str, Any],
    cluster: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    secrets_visible: bool = True,
) -> list[str]:
    """Run one policy like the engine does: the cluster component first, then its TerraformModule child."""
    policy = policies(secrets_visible)[name]
    if cluster is not None:
        # The component's own verdict is tested separately; here it only primes the pack's memory.
        t.run_policy(policy, t.resource_args(CLUSTER, cluster, urn=CLUSTER_URN, config=config))
    args = t.resource_args(
        TF, props, name="m1", parent=CLUSTER_URN if cluster is not None else None, config=config
    )
    return t.run_policy(policy, args)


def secret(value: Any) -> Secret:
    return Secret(value)


# --- strict-capacity-reservation -----------------------------------------------------------------

STRICT = "strict-capacity-reservation"


def reserved_props(runtime: Any = None, tfvars: dict[str, Any] | None = None) -> dict[str, Any]:
    return t.module_props(
        tfvars=tfvars or t.reserved_tfvars(),
        runtime_tfvars=secret(t.reservation()) if runtime is None else runtime,
    )


def test_strict_compliant_reserved_pool_with_matching_block() -> None:
    assert_clean(run_module(STRICT, reserved_props(), cluster=t.cluster_props(block=secret(t.BLOCK_ID))))


def test_strict_compliant_unbound_cluster_without_reservation() -> None:
    assert_clean(run_module(STRICT, t.module_props(), cluster=t.cluster_props(block=secret(""))))


@pytest.mark.parametrize(
    ("runtime", "fragment"),
    [
        (t.reservation(policy="AUTO"), "reservation policy is AUTO"),
        (t.reservation(policy="strict"), "must be exactly STRICT"),
        ({"gpu_nodes_reservation_policy": {"reservation_ids": [t.BLOCK_ID]}}, "has no `policy`"),
        (
            {"gpu_nodes_reservation_policy": {"policy": "STRICT", "reservation_ids": []}},
            "exactly one capacity block",
        ),
        (
            {
                "gpu_nodes_reservation_policy": {
                    "policy": "STRICT",
                    "reservation_ids": [t.BLOCK_ID, OTHER_BLOCK],
                }
            },
            "holds 2 usable block id(s)",
        ),
        (t.reservation(block=OTHER_BLOCK), "different capacity block"),
        ({}, "renders no gpu_nodes_reservation_policy"),
    ],
)
def test_strict_violations_on_a_bound_cluster(runtime: dict[str, Any], fragment: str) -> None:
    messages = run_module(
        STRICT, reserved_props(runtime=secret(runtime)), cluster=t.cluster_props(block=secret(t.BLOCK_ID))
    )
    assert_violation(STRICT, messages, fragment)


def test_strict_preemptible_reserved_pool() -> None:
    tfvars = t.reserved_tfvars() | {"gpu_nodes_preemptible": True}
    messages = run_module(
        STRICT, reserved_props(tfvars=tfvars), cluster=t.cluster_props(block=secret(t.BLOCK_ID))
    )
    assert_violation(STRICT, messages, "preemptible")


def test_strict_reservation_without_gpu_nodes() -> None:
    tfvars = t.reserved_tfvars() | {"gpu_nodes_fixed_count_per_group": 0, "gpu_node_groups": 0}
    assert_violation(STRICT, run_module(STRICT, reserved_props(tfvars=tfvars)), "GPU pool has no nodes")


def test_strict_reservation_on_an_unbound_cluster() -> None:
    messages = run_module(STRICT, reserved_props(), cluster=t.cluster_props(block=secret("")))
    assert_violation(STRICT, messages, "although its cluster binds none")


def test_strict_block_id_written_to_plain_tfvars() -> None:
    tfvars = t.reserved_tfvars() | t.reservation()
    messages = run_module(
        STRICT, reserved_props(runtime={}, tfvars=tfvars), cluster=t.cluster_props(block=secret(t.BLOCK_ID))
    )
    assert_violation(STRICT, messages, "tfvars carry gpu_nodes_reservation_policy")


def test_strict_runtime_tfvars_not_secret() -> None:
    messages = run_module(
        STRICT, reserved_props(runtime=t.reservation()), cluster=t.cluster_props(block=secret(t.BLOCK_ID))
    )
    assert_violation(STRICT, messages, "runtime_tfvars is not a Pulumi secret")


def test_strict_runtime_tfvars_plain_is_not_judged_when_secrets_are_invisible() -> None:
    # A stock SDK unwraps secrets, so a plain value proves nothing; only the rendered policy is judged.
    messages = run_module(
        STRICT,
        reserved_props(runtime=t.reservation()),
        cluster=t.cluster_props(block=t.BLOCK_ID),
        secrets_visible=False,
    )
    assert_clean(messages)


def test_strict_handles_raw_secret_signature_objects() -> None:
    raw = {
        "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
        "value": t.reservation(policy="AUTO"),
    }
    block = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": t.BLOCK_ID}
    messages = run_module(STRICT, reserved_props(runtime=raw), cluster=t.cluster_props(block=block))
    assert_violation(STRICT, messages, "reservation policy is AUTO")
    assert "runtime_tfvars is not a Pulumi secret" not in messages[0]


def test_strict_cluster_block_in_plaintext() -> None:
    policy = policies()[STRICT]
    messages = t.run_policy(
        policy, t.resource_args(CLUSTER, t.cluster_props(block=t.BLOCK_ID), urn=CLUSTER_URN)
    )
    assert_violation(STRICT, messages, "capacity_block_group (<masked>) is a plain string")
    assert_clean(t.run_policy(policy, t.resource_args(CLUSTER, t.cluster_props(block=secret(t.BLOCK_ID)))))


def test_strict_unknown_value_is_left_to_the_sdk() -> None:
    # During preview an unknown input raises UnknownValueError, which the SDK reports as "can't run".
    from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE, UnknownValueError

    props = reserved_props(runtime=UNKNOWN_OBJECT_VALUE)
    with pytest.raises(UnknownValueError):
        run_module(STRICT, props)


# --- filestore-nofail-mount ----------------------------------------------------------------------

FS = "filestore-nofail-mount"


def _facts(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    facts = t.recipe_facts()
    mutate(facts)
    return facts


def test_filestore_compliant() -> None:
    assert_clean(run_module(FS, t.module_props()))


def test_filestore_off_is_not_judged() -> None:
    facts: dict[str, Any] = {"filesystem_attachments": [], "filesystem_mount": None}
    assert_clean(
        run_module(FS, t.module_props(tfvars=t.base_tfvars() | {"enable_filestore": False}, facts=facts))
    )


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda f: f["filesystem_mount"].update(options="defaults"), "lack `nofail`"),
        (lambda f: f["filesystem_mount"].update(fs_type="nfs"), "not virtiofs"),
        (lambda f: f["filesystem_mount"].update(path="/data"), "not filestore_mount_path"),
        (lambda f: f["filesystem_mount"].update(tag="other"), "mounts tag 'other'"),
        (lambda f: f.update(filesystem_mount=None), "does not mount the shared filesystem"),
        (lambda f: f["filesystem_attachments"].pop(1), "to the gpu node group"),
        (lambda f: f["filesystem_attachments"].pop(0), "to the cpu node group"),
        (
            lambda f: f["filesystem_attachments"][0].update(attach_mode="READ_ONLY"),
            "'READ_ONLY', not READ_WRITE",
        ),
        (lambda f: f["filesystem_attachments"][1].update(mount_tag="x"), "attaches tag 'x'"),
    ],
)
def test_filestore_violations(mutate: Callable[[dict[str, Any]], None], fragment: str) -> None:
    assert_violation(FS, run_module(FS, t.module_props(facts=_facts(mutate))), fragment)


def test_filestore_relative_path_and_bad_tag() -> None:
    tfvars = t.base_tfvars() | {"filestore_mount_path": "mnt/data", "filestore_mount_tag": "a,b"}
    message = assert_violation(
        FS, run_module(FS, t.module_props(tfvars=tfvars)), "absolute path", "without spaces or commas"
    )
    assert "not filestore_mount_path" in message


def test_filestore_missing_recipe_facts() -> None:
    props = t.module_props()
    del props["recipe_facts"]
    assert_violation(FS, run_module(FS, props), "recipe_facts are missing")


def test_filestore_config_narrows_node_groups() -> None:
    facts = _facts(lambda f: f["filesystem_attachments"].pop(1))
    assert_clean(run_module(FS, t.module_props(facts=facts), config={"required_node_groups": ["cpu"]}))


# --- mig-version-pinning -------------------------------------------------------------------------

MIG = "mig-version-pinning"


def mig_props(tfvars: dict[str, Any] | None = None, runtime: Any = None) -> dict[str, Any]:
    return t.module_props(
        tfvars=tfvars or t.mig_tfvars(),
        runtime_tfvars=secret(t.reservation()) if runtime is None else runtime,
    )


def mig_cluster(**overrides: Any) -> dict[str, Any]:
    return t.cluster_props(block=secret(t.BLOCK_ID), gpu_driver_mode="operator", mig_enabled=True) | overrides


def test_mig_compliant() -> None:
    assert_clean(run_module(MIG, mig_props(), cluster=mig_cluster()))


def test_mig_not_requested_is_not_judged() -> None:
    assert_clean(run_module(MIG, t.module_props(), cluster=t.cluster_props()))


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("gpu_operator_version", "v25.10.0", "gpu_operator_version is 'v25.10.0', pinned 'v26.3.3'"),
        ("gpu_driver_version", "570.1", "gpu_driver_version is '570.1'"),
        ("gpu_device_plugin_version", "v0.18.0", "gpu_device_plugin_version"),
        ("gpu_gfd_version", None, "gpu_gfd_version is unset"),
        ("gpu_mig_manager_version", "v0.13.0", "gpu_mig_manager_version"),
        ("mig_strategy", "single", "mig_strategy is 'single'"),
        ("mig_parted_config", "all-1g.24gb", "mig_parted_config"),
        ("gpu_nodes_platform", "gpu-h100-sxm", "MIG runs only on 'gpu-rtx6000'"),
        ("gpu_nodes_preset", "8gpu-192vcpu-1744gb", "gpu_nodes_preset"),
        ("gpu_node_groups", 3, "3 GPU worker(s)"),
        ("gpu_disk_size", "1023", "MIG needs 128 GiB"),
        ("gpu_nodes_driverfull_image", True, "operator driver"),
        ("custom_driver", False, "custom_driver is False"),
        ("gpu_mig_with_reboot", False, "gpu_mig_with_reboot"),
        ("gpu_operator_rdma_enabled", True, "gpu_operator_rdma_enabled"),
        ("k8s_version", "1.33", "k8s_version is '1.33'"),
        ("gpu_nodes_preemptible", True, "preemptible"),
    ],
)
def test_mig_violations(key: str, value: Any, fragment: str) -> None:
    tfvars = t.mig_tfvars()
    if value is None:
        tfvars.pop(key)
    else:
        tfvars[key] = value
    assert_violation(MIG, run_module(MIG, mig_props(tfvars=tfvars), cluster=mig_cluster()), fragment)


def test_mig_unreserved_workers() -> None:
    messages = run_module(MIG, mig_props(runtime={}), cluster=mig_cluster(capacity_block_group=secret("")))
    assert_violation(MIG, messages, "not bound to a capacity block")


def test_mig_cluster_component_needs_operator_and_a_block() -> None:
    policy = policies()[MIG]
    cluster = mig_cluster(gpu_driver_mode="managed-image", capacity_block_group=secret(""))
    message = assert_violation(
        MIG, t.run_policy(policy, t.resource_args(CLUSTER, cluster)), "gpu_driver_mode operator"
    )
    assert "capacity_block_group is empty" in message


def test_mig_requested_by_the_cluster_but_not_rendered() -> None:
    messages = run_module(MIG, t.module_props(), cluster=mig_cluster())
    assert_violation(
        MIG, messages, "mig_strategy is 'none', must be 'mixed'", "gpu_operator_version is unset"
    )


def test_mig_pins_are_configurable() -> None:
    tfvars = t.mig_tfvars() | {"gpu_operator_version": "v26.4.0"}
    config = {"gpu_operator_version": "v26.4.0"}
    assert_clean(run_module(MIG, mig_props(tfvars=tfvars), cluster=mig_cluster(), config=config))
    assert_violation(
        MIG, run_module(MIG, mig_props(), cluster=mig_cluster(), config=config), "pinned 'v26.4.0'"
    )


# --- nvswitch-operator-acknowledged --------------------------------------------------------------

NV = "nvswitch-operator-acknowledged"


def nvswitch_tfvars(**overrides: Any) -> dict[str, Any]:
    return (
        t.base_tfvars()
        | {
            "gpu_nodes_platform": "gpu-h100-sxm",
            "gpu_nodes_preset": "8gpu-128vcpu-1600gb",
            "gpu_nodes_driverfull_image": False,
            "custom_driver": False,
        }
        | overrides
    )


def test_nvswitch_operator_without_acknowledgement() -> None:
    cluster = t.cluster_props(gpu_driver_mode="operator", nvswitch_topology=True)
    messages = run_module(NV, t.module_props(tfvars=nvswitch_tfvars()), cluster=cluster)
    assert_violation(NV, messages, "8 GPUs per node on gpu-h100-sxm", "its cluster does not set")


def test_nvswitch_operator_with_acknowledgement() -> None:
    cluster = t.cluster_props(
        gpu_driver_mode="operator", nvswitch_topology=True, allow_unsafe_nvswitch_operator=True
    )
    assert_clean(run_module(NV, t.module_props(tfvars=nvswitch_tfvars()), cluster=cluster))


def test_nvswitch_managed_image_is_fine() -> None:
    tfvars = nvswitch_tfvars(gpu_nodes_driverfull_image=True)
    assert_clean(
        run_module(NV, t.module_props(tfvars=tfvars), cluster=t.cluster_props(nvswitch_topology=True))
    )


def test_nvswitch_clustering_counts_as_nvswitch_and_missing_driverfull_is_operator() -> None:
    tfvars = nvswitch_tfvars(gpu_nodes_preset="1gpu-16vcpu-200gb", enable_gpu_cluster=True)
    del tfvars["gpu_nodes_driverfull_image"]
    assert_violation(
        NV,
        run_module(NV, t.module_props(tfvars=tfvars)),
        "GPU clustering is on",
        "no K8sTrainingCluster parent",
    )


def test_nvswitch_not_on_single_gpu_or_pcie_nodes() -> None:
    assert_clean(run_module(NV, t.module_props(tfvars=nvswitch_tfvars(gpu_nodes_preset="1gpu-16vcpu-200gb"))))
    assert_clean(run_module(NV, t.module_props(tfvars=nvswitch_tfvars(gpu_nodes_platform="gpu-rtx6000"))))
    cpu_only = nvswitch_tfvars(gpu_nodes_fixed_count_per_group=0, gpu_node_groups=0)
    assert_clean(run_module(NV, t.module_props(tfvars=cpu_only)))


def test_nvswitch_cluster_component_itself() -> None:
    policy = policies()[NV]
    bad = t.cluster_props(gpu_driver_mode="operator", nvswitch_topology=True)
    assert_violation(
        NV, t.run_policy(policy, t.resource_args(CLUSTER, bad)), "without allow_unsafe_nvswitch_operator"
    )
    ok = bad | {"allow_unsafe_nvswitch_operator": True}
    assert_clean(t.run_policy(policy, t.resource_args(CLUSTER, ok)))


# --- gpu-cluster-needs-fabric --------------------------------------------------------------------

FABRIC = "gpu-cluster-needs-fabric"


def test_fabric_compliant_and_off() -> None:
    assert_clean(run_module(FABRIC, t.module_props(tfvars=t.fabric_tfvars())))
    assert_clean(run_module(FABRIC, t.module_props()))


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"infiniband_fabric": ""}, "infiniband_fabric is not set"),
        ({"gpu_nodes_preset": "1gpu-16vcpu-200gb"}, "is not a 8-GPU preset"),
        (
            {"gpu_nodes_platform": "gpu-rtx6000", "gpu_nodes_preset": "8gpu-192vcpu-1744gb"},
            "is not fabric-capable",
        ),
        ({"gpu_nodes_fixed_count_per_group": 0, "gpu_node_groups": 0}, "no GPU nodes"),
    ],
)
def test_fabric_violations(overrides: dict[str, Any], fragment: str) -> None:
    tfvars = t.fabric_tfvars() | overrides
    if overrides.get("infiniband_fabric") == "":
        tfvars.pop("infiniband_fabric")
    assert_violation(FABRIC, run_module(FABRIC, t.module_props(tfvars=tfvars)), fragment)


# --- no-plaintext-credentials --------------------------------------------------------------------

CRED = "no-plaintext-credentials"
ACCESS_KEY = catalog.ACCESS_KEY


def run_cred(resource_type: str, props: dict[str, Any], aso: tuple[str, ...] = (), **kw: Any) -> list[str]:
    policy = policies(kw.pop("secrets_visible", True))[CRED]
    return t.run_policy(policy, t.resource_args(resource_type, props, additional_secret_outputs=aso, **kw))


def test_credentials_access_key_secret_output_must_be_secret() -> None:
    assert_violation(CRED, run_cred(ACCESS_KEY, {"service_account_id": "sa-1"}), "additional_secret_outputs")
    assert_clean(run_cred(ACCESS_KEY, {"service_account_id": "sa-1"}, aso=("secret",)))


@pytest.mark.parametrize(
    ("props", "path"),
    [
        ({"iam_token": "t0k3n-value"}, "`iam_token`"),
        ({"tfvars": {"registry_password": "hunter2"}}, "`tfvars.registry_password`"),
        ({"config": {"nested": [{"accessKeySecret": "abc"}]}}, "`config.nested[0].accessKeySecret`"),
        ({"passphrase": "p"}, "`passphrase`"),
    ],
)
def test_credentials_plain_strings_are_flagged_without_echoing_them(props: dict[str, Any], path: str) -> None:
    message = assert_violation(CRED, run_cred(catalog.BUCKET, props), path)
    for value in ("t0k3n-value", "hunter2", "abc'", "'p'"):
        assert value not in message


def test_credentials_secrets_names_and_non_strings_pass() -> None:
    props = {
        "iam_token": secret("t"),
        "tfvars": secret({"registry_password": "x"}),
        "identity_env": ["TF_VAR_iam_token"],
        "token_env": "TF_VAR_iam_token",
        "secret_name": "bucket-key",
        "use_token": True,
        "empty_token": "",
        "__provider": "pickled",
    }
    assert_clean(run_cred(catalog.TERRAFORM_MODULE, props))


def test_credentials_ignore_properties_and_foreign_types() -> None:
    assert_clean(
        run_cred(catalog.BUCKET, {"tfvars": {"token": "x"}}, config={"ignore_properties": ["tfvars.token"]})
    )
    assert_clean(run_cred("kubernetes:core/v1:Secret", {"password": "x"}))


def test_credentials_name_scan_needs_visible_secrets() -> None:
    # With a stock SDK every secret arrives unwrapped; a plain value would prove nothing.
    assert_clean(run_cred(catalog.BUCKET, {"iam_token": "t"}, secrets_visible=False))
    assert_violation(CRED, run_cred(ACCESS_KEY, {}, secrets_visible=False), "additional_secret_outputs")


# --- fleet-assets-retained -----------------------------------------------------------------------

RETAIN = "fleet-assets-retained"


@pytest.mark.parametrize("resource_type", [catalog.PROJECT, catalog.BUCKET])
def test_retained_assets(resource_type: str) -> None:
    policy = policies()[RETAIN]
    assert_clean(t.run_policy(policy, t.resource_args(resource_type, {"retain_on_delete": True})))
    for props in ({}, {"retain_on_delete": False}):
        assert_violation(
            RETAIN, t.run_policy(policy, t.resource_args(resource_type, props)), "retain_on_delete"
        )


def test_retained_other_types_are_not_judged() -> None:
    assert_clean(t.run_policy(policies()[RETAIN], t.resource_args(catalog.SUBNET, {})))


# --- gpu-node-group-replacement ------------------------------------------------------------------

REPLACEMENT = "gpu-node-group-replacement"


def test_replacement_without_a_plan_is_not_judged() -> None:
    # No Terraform plan handed in (a new cluster, an unchanged one): nothing to judge.
    assert_clean(run_module(REPLACEMENT, t.module_props()))


@pytest.mark.parametrize(
    "address",
    [
        "nebius_mk8s_v1_node_group.gpu[0]",
        "module.k8s.nebius_mk8s_v1_node_group.gpu[1]",
        "terraform_data.gpu_node_group[0]",
        "nebius_mk8s_v1_node_group.gb300[0]",
    ],
)
def test_replacement_of_a_gpu_node_group_is_reported(address: str) -> None:
    config = {"planned_replacements": ["nebius_mk8s_v1_node_group.cpu-only", address]}
    message = assert_violation(REPLACEMENT, run_module(REPLACEMENT, t.module_props(), config=config), address)
    assert "cpu-only" not in message  # a CPU node group's replacement is not what this policy judges


def test_replacement_of_cpu_node_groups_only_passes_and_markers_are_configurable() -> None:
    cpu_only = {"planned_replacements": ["nebius_mk8s_v1_node_group.cpu-only"]}
    assert_clean(run_module(REPLACEMENT, t.module_props(), config=cpu_only))
    custom = {**cpu_only, "gpu_markers": ["cpu"]}
    assert_violation(REPLACEMENT, run_module(REPLACEMENT, t.module_props(), config=custom), "cpu-only")


def test_replacement_judges_only_the_terraform_module() -> None:
    config = {"planned_replacements": ["nebius_mk8s_v1_node_group.gpu[0]"]}
    policy = policies()[REPLACEMENT]
    assert_clean(t.run_policy(policy, t.resource_args(CLUSTER, {}, urn=CLUSTER_URN, config=config)))


# --- fleet-tags-present (stack) ------------------------------------------------------------------

TAGS = "fleet-tags-present"
PROJECT_TAGS = {"npa:fleet": "f1", "npa:project": "p1", "npa:kind": "project"}


def test_tags_project_stack() -> None:
    policy = policies()[TAGS]
    assert_clean(t.run_policy(policy, t.stack_args(PROJECT_TAGS, (catalog.PROJECT,))))
    message = assert_violation(
        TAGS, t.run_policy(policy, t.stack_args({"npa:fleet": "f1"})), "npa:project, npa:kind"
    )
    assert "npa:cluster" not in message


def test_tags_cluster_stack_needs_cluster_tag() -> None:
    policy = policies()[TAGS]
    tags = PROJECT_TAGS | {"npa:kind": "cluster"}
    assert_violation(TAGS, t.run_policy(policy, t.stack_args(tags)), "cluster stack", "npa:cluster")
    assert_clean(t.run_policy(policy, t.stack_args(tags | {"npa:cluster": "c1"})))
    # A stack holding a cluster is a cluster stack whatever its kind tag says.
    assert_violation(TAGS, t.run_policy(policy, t.stack_args(PROJECT_TAGS, (TF,))), "npa:cluster")


def test_tags_config() -> None:
    policy = policies()[TAGS]
    args = t.stack_args({"npa:fleet": "f1"}, config={"required_tags": ["npa:fleet"]})
    assert_clean(t.run_policy(policy, args))


def test_filestore_facts_may_reference_the_configured_variables() -> None:
    def by_reference(f: dict[str, Any]) -> None:
        for att in f["filesystem_attachments"]:
            att["mount_tag"] = "var.filestore_mount_tag"
        f["filesystem_mount"].update(tag="${var.filestore_mount_tag}", path="var.filestore_mount_path")

    assert_clean(run_module(FS, t.module_props(facts=_facts(by_reference))))
    wrong = _facts(lambda f: f["filesystem_mount"].update(path="var.other_path"))
    assert_violation(FS, run_module(FS, t.module_props(facts=wrong)), "not filestore_mount_path")


def test_mig_without_the_driverfull_variable_is_operator_mode() -> None:
    # A recipe that does not declare gpu_nodes_driverfull_image gets none rendered: its default is operator.
    tfvars = t.mig_tfvars()
    del tfvars["gpu_nodes_driverfull_image"]
    assert_clean(run_module(MIG, mig_props(tfvars=tfvars), cluster=mig_cluster()))
