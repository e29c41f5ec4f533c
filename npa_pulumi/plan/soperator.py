"""The soperator recipe's tfvars from the `npa.soperator/v0.0.1` payload, and the node groups, disks and
filesystems those tfvars make (preflight budgets them; the gate expects them).

Identity (tenant, project, region, subnet, the o11y ids) is never rendered: the Terraform bridge passes it
as TF_VAR_* at run time (npa_pulumi/bridge/soperator_recipe.py IDENTITY_NAMES).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

from npa_pulumi.spec.models import SOPERATOR_ROLE_PRESETS, SoperatorSpec, SoperatorWorkerSpec
from npa_pulumi.spec.soperator_rules import role_minimum_preset, worker_count

ROLE_PLATFORM: Final = "cpu-d3"
DISK_TYPE: Final = "NETWORK_SSD"
ROLE_BOOT_DISK_GIB: Final[dict[str, int]] = {
    "system": 128,
    "controller": 128,
    "login": 256,
    "accounting": 128,
}
CONTROLLER_SPOOL_GIB: Final = 128
ACCOUNTING_GIB: Final = 128
FILESTORE_BLOCK_KIB: Final = 4
NODES_PER_NODEGROUP: Final = 8  # one worker node group per chunk of this many nodes
DEFAULT_K8S_VERSION: Final = "1.30"
_COMPANY = re.compile(r"^[a-z][a-z\d\-]*[a-z\d]+$")


@dataclass(frozen=True)
class NodeGroupShape:
    """One node group the recipe creates."""

    name: str
    role: str  # system | controller | login | accounting | worker
    nodes: int
    platform: str
    preset: str
    boot_disk_gib: int
    nodeset: str = ""  # the worker set a worker group belongs to
    fabric: str = ""  # a worker group's InfiniBand fabric (it joins that set's GPU cluster)

    @property
    def gpu(self) -> bool:
        return self.platform.startswith("gpu-")


def company_name(cluster_name: str) -> str:
    """The recipe's `company_name` (its cluster is `soperator-<company_name>`): the target's name, which
    the spec already holds to a DNS label, cut to the recipe's 32 characters."""
    name = cluster_name[:32].rstrip("-")
    if not _COMPANY.match(name):
        raise ValueError(f"cluster name {cluster_name!r} cannot be the soperator recipe's company_name")
    return name


def _role_preset(payload: SoperatorSpec, role: str) -> str:
    """The role's preset: the spec's, else the recipe's minimum for the cluster's sizing tier."""
    spec = getattr(payload.control_plane, role)
    return str(spec.preset or role_minimum_preset(role, worker_count(payload)))


def _chunks(worker: SoperatorWorkerSpec) -> list[int]:
    per = min(NODES_PER_NODEGROUP, worker.size)
    return [min(per, worker.size - i * per) for i in range(math.ceil(worker.size / per))]


def node_groups(cluster_name: str, payload: SoperatorSpec) -> list[NodeGroupShape]:
    """Every node group, in the order the recipe names them (roles, then each worker set's chunks)."""
    prefix = f"soperator-{company_name(cluster_name)}"
    roles = {
        "system": payload.control_plane.system.min_size,
        "controller": 1,
        "login": 1,
        **({"accounting": 1} if payload.accounting else {}),
    }
    groups = [
        NodeGroupShape(
            f"{prefix}-{role}",
            role,
            count,
            ROLE_PLATFORM,
            _role_preset(payload, role),
            ROLE_BOOT_DISK_GIB[role],
        )
        for role, count in roles.items()
    ]
    for worker in payload.workers:
        for index, count in enumerate(_chunks(worker)):
            groups.append(
                NodeGroupShape(
                    f"{prefix}-worker-{worker.name}-{index}",
                    "worker",
                    count,
                    worker.platform,
                    worker.preset,
                    worker.boot_disk_gib,
                    nodeset=worker.name,
                    fabric=worker.fabric if worker.is_gpu() else "",
                )
            )
    return groups


def filestores(payload: SoperatorSpec) -> dict[str, int]:
    """The shared filesystems the recipe creates, GiB each."""
    found = {"controller-spool": CONTROLLER_SPOOL_GIB, "jail": payload.jail_size_gib}
    if payload.accounting:
        found["accounting"] = ACCOUNTING_GIB
    return found


def _disk(size_gib: int) -> dict[str, Any]:
    return {"type": DISK_TYPE, "size_gibibytes": size_gib, "block_size_kibibytes": FILESTORE_BLOCK_KIB}


def _resource(platform: str, preset: str) -> dict[str, str]:
    return {"platform": platform, "preset": preset}


def _filestore(size_gib: int) -> dict[str, Any]:
    return {"spec": {"size_gibibytes": size_gib, "block_size_kibibytes": FILESTORE_BLOCK_KIB}}


def payload_variables(payload: SoperatorSpec) -> dict[str, tuple[Any, bool]]:
    """The recipe's top-level variables the payload sets as the original renders them (newest recipe:
    `use_default_apparmor_profile`, `slurm_rest_enabled`, `node_group_version`), each as (value, needed):
    needed when the value asks for what a recipe without the variable would not do (the AppArmor profile
    on, REST on, a pinned node-group version), so such a recipe is refused, naming it; otherwise it is
    left out of a recipe that does not declare it (the recipe's own behaviour is the value). An unset
    `node_group_version` is not rendered (the recipe's default)."""
    found: dict[str, tuple[Any, bool]] = {
        "use_default_apparmor_profile": (
            payload.use_default_apparmor_profile,
            payload.use_default_apparmor_profile,
        ),
        "slurm_rest_enabled": (payload.slurm_rest_enabled, payload.slurm_rest_enabled),
    }
    if payload.node_group_version.strip():
        found["node_group_version"] = (payload.node_group_version.strip(), True)
    return found


def needed_payload_variables(payload: SoperatorSpec) -> list[str]:
    """The payload variables a recipe must declare to honour the payload (payload_variables)."""
    return [name for name, (_, needed) in payload_variables(payload).items() if needed]


def render_tfvars(
    cluster_name: str, payload: SoperatorSpec, ssh_keys: list[str], declared: set[str] | None = None
) -> dict[str, Any]:
    """terraform.tfvars.json for the soperator recipe: every value it needs but identity. `declared`: the
    recipe's variables (None: every variable); a payload variable it lacks is left out (the plan refuses
    the recipe when the payload needs it: needed_payload_variables)."""
    role = {r: _role_preset(payload, r) for r in SOPERATOR_ROLE_PRESETS}
    system = payload.control_plane.system
    tfvars: dict[str, Any] = {
        "company_name": company_name(cluster_name),
        "k8s_version": payload.k8s_version or DEFAULT_K8S_VERSION,
        "slurm_operator_version": payload.slurm_operator_version,
        "slurm_login_ssh_root_public_keys": ssh_keys,
        "accounting_enabled": payload.accounting,
        "filestore_controller_spool": _filestore(CONTROLLER_SPOOL_GIB),
        "filestore_jail": _filestore(payload.jail_size_gib),
        "slurm_nodeset_system": {
            "min_size": system.min_size,
            "max_size": system.max_size if system.max_size is not None else system.min_size,
            "resource": _resource(ROLE_PLATFORM, role["system"]),
            "boot_disk": _disk(ROLE_BOOT_DISK_GIB["system"]),
        },
        "slurm_nodeset_controller": {
            "size": 1,
            "resource": _resource(ROLE_PLATFORM, role["controller"]),
            "boot_disk": _disk(ROLE_BOOT_DISK_GIB["controller"]),
        },
        "slurm_nodeset_login": {
            "size": 1,
            "resource": _resource(ROLE_PLATFORM, role["login"]),
            "boot_disk": _disk(ROLE_BOOT_DISK_GIB["login"]),
        },
        "slurm_nodeset_workers": [
            {
                "name": worker.name,
                "size": worker.size,
                "nodes_per_nodegroup": min(NODES_PER_NODEGROUP, worker.size),
                "max_unavailable_percent": 50,
                "preemptible": worker.preemptible,
                "resource": _resource(worker.platform, worker.preset),
                "boot_disk": _disk(worker.boot_disk_gib),
                **({"gpu_cluster": {"infiniband_fabric": worker.fabric}} if worker.is_gpu() else {}),
            }
            for worker in payload.workers
        ],
        # Observability and backups are off in what the fleet deploys; the recipe still requires them.
        "o11y_iam_group_id": "",
        "o11y_profile": "",
        "backups_enabled": "force_disable",
        "backups_schedule": "@daily-random",
        "backups_prune_schedule": "@daily-random",
        "backups_retention": {"keepDaily": 7},
    }
    for name, (value, _) in payload_variables(payload).items():
        if declared is None or name in declared:
            tfvars[name] = value
    if payload.accounting:
        tfvars["filestore_accounting"] = _filestore(ACCOUNTING_GIB)
        tfvars["slurm_nodeset_accounting"] = {
            "resource": _resource(ROLE_PLATFORM, role["accounting"]),
            "boot_disk": _disk(ROLE_BOOT_DISK_GIB["accounting"]),
        }
    return tfvars
