"""The original's npa.soperator/v0.0.1 rules that go beyond worker pools: the operator version contract, the
root-login SSH key, the control-plane preset minimum of the recipe's sizing tier, REST with accounting, and
the versions that must not be empty.

Facts from the original's `npa/src/npa/soperator/spec.py` (nebius-physical-ai 5d757be8), restated:
only operator versions 4.1.6 and 4.1.7 are verified, 4.1.7 only with `use_default_apparmor_profile: true`
(the unconfined Enroot/Pyxis setup is verified with 4.1.6 alone); one root-login key, an OpenSSH public-key
record; explicit control-plane presets are cpu-d3 presets at least the tier's minimum (the tier follows the
total worker count, as the recipe's `modules/sizing_tier` does); REST needs accounting.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

from npa_pulumi.spec.models import SoperatorSpec
from npa_pulumi.spec.names import PathTuple
from npa_pulumi.spec.problems import RawProblem

DEFAULT_OPERATOR_VERSION = "4.1.6"
# 4.1.7 is verified only with the AppArmor profile on; the unconfined user-namespace setup only with 4.1.6.
VERIFIED_OPERATOR_VERSIONS = ("4.1.6", "4.1.7")
UNCONFINED_OPERATOR_VERSIONS = ("4.1.6",)
_VERSION_RE = re.compile(r"[1-9][0-9]*\.[0-9]+\.[0-9]+")
_SSH_KEY_TYPE_RE = re.compile(
    r"ssh-(?:ed25519|rsa)|ecdsa-sha2-nistp(?:256|384|521)|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com"
)

# The recipe's sizing tiers: (upper bound of the total worker count, tier); XL above the last.
_TIERS = ((10, "XS"), (100, "S"), (500, "M"), (2000, "L"))
# cpu-d3 presets a control-plane role may name, by vCPUs (their rank).
CPU_D3_ROLE_PRESETS: dict[str, int] = {
    "4vcpu-16gb": 4,
    "8vcpu-32gb": 8,
    "16vcpu-64gb": 16,
    "32vcpu-128gb": 32,
    "64vcpu-256gb": 64,
    "128vcpu-512gb": 128,
}
_ROLE_MINIMUM: dict[str, dict[str, str]] = {
    "system": {"XS": "16vcpu-64gb", "S": "16vcpu-64gb", "M": "16vcpu-64gb", "L": "32vcpu-128gb"},
    "controller": {},
    "accounting": {"XS": "8vcpu-32gb", "S": "8vcpu-32gb", "M": "8vcpu-32gb", "L": "16vcpu-64gb"},
    "login": {},
}
_ROLE_MINIMUM_OTHERWISE = {
    "system": "64vcpu-256gb",
    "controller": "16vcpu-64gb",
    "accounting": "32vcpu-128gb",
    "login": "16vcpu-64gb",
}


def sizing_tier(worker_count: int) -> str:
    """The recipe's sizing tier for this many Slurm workers."""
    for bound, tier in _TIERS:
        if worker_count < bound:
            return tier
    return "XL"


def role_minimum_preset(role: str, worker_count: int) -> str:
    """The smallest cpu-d3 preset the recipe accepts for a control-plane role at this size."""
    return _ROLE_MINIMUM[role].get(sizing_tier(worker_count), _ROLE_MINIMUM_OTHERWISE[role])


def worker_count(payload: SoperatorSpec) -> int:
    return sum(max(worker.size, 0) for worker in payload.workers)


def _problem(path: PathTuple, message: str, hint: str | None = None) -> RawProblem:
    return RawProblem(path, message, hint)


def check_versions(payload: SoperatorSpec) -> Iterator[RawProblem]:
    """The operator version contract, and the Kubernetes/node-group versions that must not be empty."""
    version = payload.slurm_operator_version.strip()
    supported = ", ".join(VERIFIED_OPERATOR_VERSIONS)
    if not _VERSION_RE.fullmatch(version):
        yield _problem(
            ("slurm_operator_version",),
            "slurm_operator_version must be an explicit semantic version",
            f"e.g. {DEFAULT_OPERATOR_VERSION!r}; verified versions: {supported}",
        )
    elif version not in VERIFIED_OPERATOR_VERSIONS:
        yield _problem(
            ("slurm_operator_version",),
            f"slurm_operator_version {version} is not a verified Slurm operator version",
            f"use {DEFAULT_OPERATOR_VERSION} (the default, unconfined Enroot/Pyxis); verified versions: "
            f"{supported} (4.1.7 only with use_default_apparmor_profile: true)",
        )
    elif not payload.use_default_apparmor_profile and version not in UNCONFINED_OPERATOR_VERSIONS:
        yield _problem(
            ("use_default_apparmor_profile",),
            f"slurm_operator_version {version} requires use_default_apparmor_profile: true "
            f"(the unconfined Enroot/Pyxis setup is verified only with {DEFAULT_OPERATOR_VERSION})",
            "set use_default_apparmor_profile: true, or use slurm_operator_version "
            f"{DEFAULT_OPERATOR_VERSION}",
        )
    for field in ("k8s_version", "node_group_version"):
        # Unset means the recipe's default; an explicitly empty value is what the original refuses.
        if field in payload.model_fields_set and not getattr(payload, field).strip():
            yield _problem(
                (field,),
                f"{field} must not be empty",
                "remove it for the recipe's default, or give a version",
            )


def check_rest(payload: SoperatorSpec) -> Iterator[RawProblem]:
    if payload.slurm_rest_enabled and not payload.accounting:
        yield _problem(
            ("slurm_rest_enabled",),
            "slurm_rest_enabled: true requires accounting: true (the Slurm operator reconciles the REST API "
            "only with an accounting database)",
            "set accounting: true, or remove slurm_rest_enabled",
        )


def check_ssh_keys(payload: SoperatorSpec) -> Iterator[RawProblem]:
    """One root-login key: `root_login_ssh_public_key`, or its legacy alias `ssh_public_keys` of one."""
    if payload.root_login_ssh_public_key and payload.ssh_public_keys:
        yield _problem(
            ("ssh_public_keys",),
            "set only root_login_ssh_public_key; ssh_public_keys is its legacy alias",
            "move the key to root_login_ssh_public_key and remove ssh_public_keys",
        )
    if len(payload.ssh_public_keys) > 1:
        yield _problem(
            ("ssh_public_keys", 1),
            "ssh_public_keys accepts exactly one root-login public key",
            "keep one key, as root_login_ssh_public_key",
        )
    if payload.root_login_ssh_public_key:
        yield from _key_record(("root_login_ssh_public_key",), payload.root_login_ssh_public_key)
    elif payload.ssh_public_keys:
        yield from _key_record(("ssh_public_keys", 0), payload.ssh_public_keys[0])


def _key_record(path: PathTuple, value: str) -> Iterator[RawProblem]:
    """One OpenSSH public-key record: `<type> <base64 blob> [comment]` on one line (never echoed back)."""
    hint = "one line such as 'ssh-ed25519 AAAA... user@host' (the content of a .pub file)"
    record = value.strip()
    if not record or "\n" in record or "\r" in record:
        yield _problem(path, "the root-login SSH key must be exactly one non-empty public-key record", hint)
        return
    fields = record.split(maxsplit=2)
    if len(fields) < 2 or not _SSH_KEY_TYPE_RE.fullmatch(fields[0]):
        yield _problem(
            path, "the root-login SSH key must start with a supported OpenSSH key type and a key blob", hint
        )
        return
    try:
        blob = base64.b64decode(fields[1], validate=True)
    except (binascii.Error, ValueError):
        yield _problem(path, "the root-login SSH key has an invalid base64 key blob", hint)
        return
    if not blob:
        yield _problem(path, "the root-login SSH key has an empty key blob", hint)


def check_role_presets(payload: SoperatorSpec) -> Iterator[RawProblem]:
    """Explicit control-plane presets: cpu-d3 presets at least the recipe's minimum for the cluster's size."""
    count = worker_count(payload)
    tier = sizing_tier(count)
    roles = ["system", "controller", "login"] + (["accounting"] if payload.accounting else [])
    for role in roles:
        preset = getattr(payload.control_plane, role).preset
        if not preset:
            continue
        path: PathTuple = ("control_plane", role, "preset")
        rank = CPU_D3_ROLE_PRESETS.get(preset)
        if rank is None:
            yield _problem(
                path,
                f"control_plane.{role}.preset {preset!r} is not a supported cpu-d3 preset",
                "expected one of: " + ", ".join(CPU_D3_ROLE_PRESETS),
            )
            continue
        minimum = role_minimum_preset(role, count)
        if rank < CPU_D3_ROLE_PRESETS[minimum]:
            yield _problem(
                path,
                f"control_plane.{role}.preset {preset!r} is too small for {count} Slurm worker(s) "
                f"(sizing tier {tier}: {role} needs at least {minimum})",
                "remove the preset to get the tier's minimum, or pick a larger one",
            )


def check_worker_reservations(payload: SoperatorSpec) -> Iterator[RawProblem]:
    for index, worker in enumerate(payload.workers):
        if worker.capacity_block_group and worker.capacity_block_group_name:
            yield _problem(
                ("workers", index, "capacity_block_group_name"),
                "set only one of capacity_block_group or capacity_block_group_name",
                "a capacity block group is selected by its id or by its name, not both",
            )


def check_soperator_contract(payload: SoperatorSpec) -> Iterator[RawProblem]:
    """Every rule of this module (paths relative to the payload)."""
    yield from check_versions(payload)
    yield from check_ssh_keys(payload)
    yield from check_worker_reservations(payload)
    yield from check_role_presets(payload)
    yield from check_rest(payload)


__all__ = [
    "CPU_D3_ROLE_PRESETS",
    "DEFAULT_OPERATOR_VERSION",
    "VERIFIED_OPERATOR_VERSIONS",
    "check_soperator_contract",
    "role_minimum_preset",
    "sizing_tier",
    "worker_count",
]
