"""What the original `npa fleet` left on disk for one (project, cluster), read (never written) for `adopt`.

The layout is the one the original writes (../shared/reference/original-install-layout.md, from its
source at 5d757be8), under the fleet root `~/.npa/fleet/<fleet>/`:

    fleet-state.json                               the fleet summary: per (project key, cluster) the
                                                   cluster_id and node_group_ids it deployed
    <project_key>/.npa-fleet-network.json          when the original created the project's network:
                                                   project_id, created_network_id, subnet_id, profile
    <project_key>/<cluster>/k8s-training/terraform.tfstate   Terraform's local state (version 4)
    <project_key>/<cluster>/k8s-training/terraform.tfvars    HCL, `name = value` per line (never JSON)
    <project_key>/<cluster>/.npa-fleet-env.json    the env sidecar: tenant, project, region, subnet,
                                                   context, profile, status, cluster_id
    <project_key>/<cluster>/.npa-backend-owner.json  fleet_name, project_key, cluster_name, backend
    <project_key>/<cluster>/gpu-health.json        the health gate's evidence (GPU clusters)
    ~/.npa/clusters/<context>/{cluster.json,metadata.json}   the registration npa's other commands read

Which file proves what (docs/adoption.md): the state proves the cluster id (`kube_cluster` output, else the
`nebius_mk8s_v1_cluster` resource) and the node-group ids (its `nebius_mk8s_v1_node_group` resources:
the recipe has no node-group output); the tfvars prove the variables applied; the sidecar proves the
identity Terraform ran with (without it: the state's project and subnet, and the cloud's tenant and
region of that project); the owner marker proves the install is this fleet's cluster; fleet-state.json and
the registration must name the same cluster id as the state. No file of the original proves a bucket was
created by it (5d757be8 writes no object-storage record), so a bucket is bound, never owned, by `adopt`.
Anything that cannot be read or parsed is refused with its path (`OriginalInstallError`, bad input).

A project's directory is matched to the spec's project by, in order: its key (the slug of the project's
name, else of its `project_id` — the rule both tools name stacks and directories by), the slug of its
display name (the prefix included), its `project_id`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npa_pulumi.bridge.recipe import PlannedRecipe, RecipeSource, materialize
from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.cloud.user_defaults import original_config_dir
from npa_pulumi.errors import UserInputError
from npa_pulumi.plan.recipe_surface import read_recipe_variables
from npa_pulumi.runtime import hcl
from npa_pulumi.spec.names import slug

SIDECAR = ".npa-fleet-env.json"
OWNER_MARKER = ".npa-backend-owner.json"
NETWORK_RECORD = ".npa-fleet-network.json"
FLEET_STATE = "fleet-state.json"
GPU_EVIDENCE = "gpu-health.json"
STATE_FILE = "terraform.tfstate"
TFVARS_FILE = "terraform.tfvars"
INSTALL_SUBDIR = "k8s-training"
CLUSTER_RESOURCE = "nebius_mk8s_v1_cluster"
NODE_GROUP_RESOURCE = "nebius_mk8s_v1_node_group"
# tfvars whose values are never shown (a mismatch says only that they differ).
_SECRET_WORDS = ("token", "secret", "password", "passphrase", "private_key", "ssh_public_key", "key_id")


class OriginalInstallError(UserInputError):
    """An install directory of the original tool that cannot be read as one (exit 2, nothing written)."""

    kind = "original-install"


@dataclass(frozen=True)
class Identity:
    """Where the original deployed the cluster: what its Terraform ran with. `tenant_id` and `region` are
    "" when no file records them (a state without a sidecar): the cloud's project then tells them."""

    tenant_id: str
    project_id: str
    region: str
    subnet_id: str


@dataclass(frozen=True)
class OriginalInstall:
    """One cluster's install as the original left it."""

    directory: Path  # <from>/<project>/<cluster>
    terraform_dir: Path  # <cluster>/k8s-training, where the state and the tfvars are
    state_text: str = field(repr=False)  # verbatim: it becomes the bridge's state
    tfvars: dict[str, Any] = field(repr=False)
    sidecar: dict[str, Any] | None
    owner: dict[str, Any] | None  # .npa-backend-owner.json
    network: dict[str, Any] | None  # the project's .npa-fleet-network.json, when there is one
    summary: dict[str, Any] | None  # this cluster's entry of the fleet's fleet-state.json
    registration: dict[str, Any] | None  # ~/.npa/clusters/<context>/cluster.json
    identity: Identity
    cluster_id: str
    node_group_ids: tuple[str, ...]  # the state's nebius_mk8s_v1_node_group resources
    digests: dict[str, str]  # sha256 of every file read, by path

    @property
    def profile(self) -> str:
        return str((self.sidecar or {}).get("profile") or (self.network or {}).get("profile") or "")

    @property
    def status(self) -> str:
        """The lifecycle status the sidecar recorded ("" without a sidecar)."""
        return str((self.sidecar or {}).get("status") or "")

    def subnet_owned(self, network_id: str) -> bool:
        """Whether the original created the subnet's network (so the fleet takes it over as its own)."""
        created = str((self.network or {}).get("created_network_id") or "")
        return bool(created) and created == network_id

    def record_problems(self, fleet: str, project_key: str, cluster_name: str) -> list[str]:
        """Why the original's own records say this install is not (fleet, project, cluster)'s, or not the
        state's cluster (empty: they agree, or are absent)."""
        found = []
        owner = self.owner or {}
        for key, wanted in (("fleet_name", fleet), ("cluster_name", cluster_name), ("backend", "mk8s")):
            if owner and str(owner.get(key) or "") != wanted:
                found.append(
                    f"{self.directory / OWNER_MARKER}: {key} {owner.get(key)!r}, {wanted!r} expected"
                )
        if owner and str(owner.get("project_key") or "") not in ("", project_key, self.directory.parent.name):
            found.append(f"{self.directory / OWNER_MARKER}: project_key {owner.get('project_key')!r}")
        for what, record in (
            ("the sidecar", self.sidecar),
            (FLEET_STATE, self.summary),
            ("the ~/.npa/clusters registration", self.registration),
        ):
            recorded = str((record or {}).get("cluster_id") or "")
            if recorded and recorded != self.cluster_id:
                found.append(f"{what} records cluster {recorded}, the state {self.cluster_id}")
        return found


def project_directory(root: Path, project_key: str, display_name: str, project_id: str | None) -> Path | None:
    """The directory under `root` that holds the project's clusters (see the module's docstring)."""
    for name in (project_key, slug(display_name), project_id or ""):
        if name and (root / name).is_dir():
            return root / name
    return None


def kube_context(fleet: str, project_key: str, cluster_name: str) -> str:
    """The original's kube context name (`_context_name`), which names its ~/.npa/clusters record."""
    return f"fleet-{fleet}-{project_key}-{cluster_name}"


def read_install(cluster_dir: Path, fleet: str = "") -> OriginalInstall:
    """Read one cluster's install: state, HCL tfvars, sidecars, its project's network record, the fleet's
    summary entry and its ~/.npa/clusters registration."""
    terraform_dir = cluster_dir / INSTALL_SUBDIR
    digests: dict[str, str] = {}
    state_path = terraform_dir / STATE_FILE
    if not state_path.is_file():
        raise OriginalInstallError(
            f"{cluster_dir}: no Terraform state {INSTALL_SUBDIR}/{STATE_FILE}; is this an install directory "
            "of `npa fleet`?"
        )
    state_text = _read_text(state_path, digests)
    state = _parse_json(state_path, state_text)
    if state.get("version") != 4 or not isinstance(state.get("resources"), list) or "serial" not in state:
        raise OriginalInstallError(
            f"{state_path}: not a Terraform state of format version 4 (`version`, `serial`, `resources`)"
        )
    tfvars_path = terraform_dir / TFVARS_FILE
    tfvars = parse_tfvars(tfvars_path, _read_text(tfvars_path, digests))
    sidecar = _optional_json(cluster_dir / SIDECAR, digests)
    owner = _optional_json(cluster_dir / OWNER_MARKER, digests)
    network = _optional_json(cluster_dir.parent / NETWORK_RECORD, digests)
    _optional_json(cluster_dir / GPU_EVIDENCE, digests)  # evidence: its digest goes in the receipt
    fleet_root = cluster_dir.parent.parent
    summary = _summary_entry(fleet_root / FLEET_STATE, cluster_dir, digests)
    context = str((sidecar or {}).get("context") or "") or (
        kube_context(fleet or fleet_root.name, cluster_dir.parent.name, cluster_dir.name)
    )
    registration = _optional_json(original_config_dir() / "clusters" / context / "cluster.json", digests)
    cluster_id = state_cluster_id(state)
    if not cluster_id:
        raise OriginalInstallError(
            f"{state_path}: the state records no cluster (no `kube_cluster` output and no {CLUSTER_RESOURCE} "
            "resource): the cluster was never created, or was destroyed"
        )
    return OriginalInstall(
        directory=cluster_dir,
        terraform_dir=terraform_dir,
        state_text=state_text,
        tfvars=tfvars,
        sidecar=sidecar,
        owner=owner,
        network=network,
        summary=summary,
        registration=registration,
        identity=_identity(state_path, state, sidecar),
        cluster_id=cluster_id,
        node_group_ids=state_node_group_ids(state),
        digests=digests,
    )


def _instances(state: dict[str, Any], resource_type: str) -> list[dict[str, Any]]:
    """The attributes of every instance of a managed resource type (Terraform state format version 4)."""
    found = []
    for resource in state.get("resources") or []:
        if not isinstance(resource, dict) or resource.get("type") != resource_type:
            continue
        if resource.get("mode", "managed") != "managed":
            continue
        for instance in resource.get("instances") or []:
            attributes = (instance or {}).get("attributes") if isinstance(instance, dict) else None
            if isinstance(attributes, dict):
                found.append(attributes)
    return found


def state_cluster_id(state: dict[str, Any]) -> str:
    """The cluster id as the original reads it (`kube_cluster.value.id`), else the cluster resource's."""
    output = ((state.get("outputs") or {}).get("kube_cluster") or {}).get("value")
    if isinstance(output, dict) and output.get("id"):
        return str(output["id"])
    ids = [str(a["id"]) for a in _instances(state, CLUSTER_RESOURCE) if a.get("id")]
    return ids[0] if len(ids) == 1 else ""


def state_node_group_ids(state: dict[str, Any]) -> tuple[str, ...]:
    """The node-group ids of the state's `nebius_mk8s_v1_node_group` resources, as the original takes them
    (`_terraform_managed_ids`), sorted."""
    return tuple(sorted({str(a["id"]) for a in _instances(state, NODE_GROUP_RESOURCE) if a.get("id")}))


def parse_tfvars(path: Path, text: str) -> dict[str, Any]:
    """The original's HCL `terraform.tfvars` as plain values (python-hcl2 keeps strings quoted)."""
    try:
        document = hcl.loads(text)
    except Exception as err:  # python-hcl2 raises lark's exceptions on malformed HCL
        raise OriginalInstallError(f"{path}: not valid HCL ({type(err).__name__}: {err})") from None
    if not isinstance(document, dict):
        raise OriginalInstallError(f"{path}: a file of `name = value` lines was expected")
    return {key: _hcl_value(path, value) for key, value in document.items() if not key.startswith("__")}


def _hcl_value(path: Path, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _hcl_value(path, v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, list):
        return [_hcl_value(path, item) for item in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))  # HCL's string escapes are JSON's for what tfvars hold
        except ValueError:
            raise OriginalInstallError(
                f"{path}: a string the reader cannot decode: {value[:40]}..."
            ) from None
    if isinstance(value, str) and value.startswith("${"):
        raise OriginalInstallError(f"{path}: an expression where a literal value was expected")
    return value


def _summary_entry(path: Path, cluster_dir: Path, digests: dict[str, str]) -> dict[str, Any] | None:
    """This cluster's entry of the fleet's fleet-state.json (matched by project key and cluster name)."""
    document = _optional_json(path, digests)
    if document is None:
        return None
    clusters = document.get("clusters")
    if not isinstance(clusters, list):
        raise OriginalInstallError(f"{path}: `clusters` is not a list")
    for entry in clusters:
        if (
            isinstance(entry, dict)
            and str(entry.get("project_key") or "") == cluster_dir.parent.name
            and str(entry.get("cluster_name") or "") == cluster_dir.name
        ):
            return entry
    return None


def _read_text(path: Path, digests: dict[str, str]) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError as err:
        raise OriginalInstallError(f"{path}: missing") from err
    except OSError as err:
        raise OriginalInstallError(f"{path}: cannot be read ({err.strerror or err})") from err
    digests[str(path)] = hashlib.sha256(data).hexdigest()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise OriginalInstallError(f"{path}: not UTF-8 text") from err


def _parse_json(path: Path, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise OriginalInstallError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(value, dict):
        raise OriginalInstallError(f"{path}: a JSON object was expected")
    return value


def _optional_json(path: Path, digests: dict[str, str]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    return _parse_json(path, _read_text(path, digests))


def _identity(state_path: Path, state: dict[str, Any], sidecar: dict[str, Any] | None) -> Identity:
    """The sidecar's identity, each field it lacks from the state's cluster resource."""
    found = _state_identity(state)
    recorded = sidecar or {}

    def pick(*names: str) -> str:
        for name in names:
            if recorded.get(name):
                return str(recorded[name])
        return next((found[n] for n in names if found.get(n)), "")

    identity = Identity(
        tenant_id=pick("tenant_id"),
        project_id=pick("project_id", "parent_id"),
        region=pick("region"),
        subnet_id=pick("subnet_id"),
    )
    missing = [name for name in ("project_id", "subnet_id") if not getattr(identity, name)]
    if missing:
        raise OriginalInstallError(
            f"{state_path}: cannot tell the cluster's {', '.join(missing)} (no sidecar {SIDECAR} records "
            "it and the state's cluster resource does not name it)"
        )
    return identity


def _state_identity(state: dict[str, Any]) -> dict[str, str]:
    """parent_id and control_plane.subnet_id as the state's `nebius_mk8s_v1_cluster` resource holds them."""
    found: dict[str, str] = {}
    for attributes in _instances(state, CLUSTER_RESOURCE):
        _collect(attributes, found)
    return found


def _collect(value: Any, found: dict[str, str]) -> None:
    wanted = ("tenant_id", "project_id", "parent_id", "region", "subnet_id")
    if isinstance(value, dict):
        for key, item in value.items():
            if key in wanted and isinstance(item, str) and item and key not in found:
                found[key] = item
            else:
                _collect(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)


def _terraform_value(value: Any) -> Any:
    """A variable's value as Terraform compares it: a number and its decimal string are one value (the
    original writes `cpu_disk_size = "128"`; Terraform converts it to the variable's type)."""
    if isinstance(value, dict):
        return {str(k): _terraform_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_terraform_value(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def tfvars_mismatches(
    saved: dict[str, Any], wanted: dict[str, Any], declared: set[str] | None = None
) -> list[str]:
    """The spec's tfvars (file and runtime variables together) against the saved ones, key by key, as
    Terraform compares values; secrets and capacity-block ids masked.

    `declared`: the variables of the recipe that made the state (the install's own copy). A value for a
    variable it does not declare was ignored by Terraform when it applied (a warning, no effect), so it is
    no difference; a variable set on one side only takes the recipe's default on the other, whose effect
    only the recipe's use of it decides, so it is left to Terraform's plan (`one_sided_tfvars`). Without
    `declared` every key is compared."""
    found = []
    for key in sorted(set(saved) | set(wanted)):
        if declared is not None and (key not in declared or key not in saved or key not in wanted):
            continue
        if key in saved and key in wanted and _terraform_value(saved[key]) == _terraform_value(wanted[key]):
            continue
        if key not in wanted:
            found.append(f"{key}: saved {_shown(key, saved[key])}, the spec renders none")
        elif key not in saved:
            found.append(f"{key}: the spec renders {_shown(key, wanted[key])}, the saved tfvars have none")
        elif saved[key] != wanted[key]:
            found.append(
                f"{key}: saved {_shown(key, saved[key])}, the spec renders {_shown(key, wanted[key])}"
            )
    return found


# The two variables that lay a GPU pool out in node groups (upstream's `nebius_mk8s_v1_node_group.gpu`
# has `count = gpu_node_groups`, each of `fixed_node_count = gpu_nodes_fixed_count_per_group`).
GPU_LAYOUT_VARIABLES = ("gpu_nodes_fixed_count_per_group", "gpu_node_groups")
RESERVATION_VARIABLE = "gpu_nodes_reservation_policy"


def original_gpu_layout(saved: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The saved layout of a reserved GPU pool that the original applied as ONE node group of N where
    npa-pulumi renders the same N nodes as N groups of one (5d757be8 did not split a reserved pool
    without GPU clustering; the later original and npa-pulumi do): `{gpu_nodes_fixed_count_per_group: N,
    gpu_node_groups: 1}`, the saved values, so `adopt` proves "no changes" with the install's own recipe
    and layout, and the reshaping is left to the first `up` (a real node-group change, previewed as the
    replacement it is). Empty when the layouts agree or differ in any other way (then a difference the
    tfvars comparison reports: the spec asks for another pool, not another rendering of the same one)."""
    try:
        saved_per_group, saved_groups = (_whole(saved.get(k)) for k in GPU_LAYOUT_VARIABLES)
        wanted_per_group, wanted_groups = (_whole(wanted.get(k)) for k in GPU_LAYOUT_VARIABLES)
    except (TypeError, ValueError):
        return {}
    reserved = _terraform_value(saved.get(RESERVATION_VARIABLE)) == _terraform_value(
        wanted.get(RESERVATION_VARIABLE)
    ) and bool(wanted.get(RESERVATION_VARIABLE))
    one_group_of_n = saved_groups == 1 and saved_per_group > 1
    n_groups_of_one = wanted_per_group == 1 and wanted_groups == saved_per_group
    if not (reserved and one_group_of_n and n_groups_of_one):
        return {}
    return {k: saved[k] for k in GPU_LAYOUT_VARIABLES}


def _whole(value: Any) -> int:
    """A node count as Terraform reads it (`2`, `2.0`, `"2"`); ValueError for anything else."""
    if isinstance(value, bool) or value is None:
        raise ValueError(value)
    number = float(value)
    if not number.is_integer():
        raise ValueError(value)
    return int(number)


def one_sided_tfvars(saved: dict[str, Any], wanted: dict[str, Any], declared: set[str]) -> list[str]:
    """The variables of the install's recipe that only one side sets (the recipe's default applies on the
    other): not a difference by themselves, Terraform's plan with that recipe says whether they change
    anything. Names only."""
    return sorted(k for k in (set(saved) ^ set(wanted)) if k in declared)


def install_recipe(install: OriginalInstall) -> RecipeSource:
    """The recipe that made the state: the install's own copy of `k8s-training/` and `modules/` (the
    original copies them into every install directory), as a `dir` source that is only ever read
    (materializing copies it into a work dir of npa-pulumi's; state, tfvars and `.terraform` stay out)."""
    return RecipeSource("dir", str(install.directory))


def install_recipe_variables(install: OriginalInstall) -> set[str]:
    """The variables the install's recipe copy declares (its `k8s-training/*.tf`)."""
    try:
        return read_recipe_variables(install.terraform_dir)
    except UserInputError as err:
        raise OriginalInstallError(
            f"{install.terraform_dir}: the recipe copy cannot be read ({err})"
        ) from None


def freeze_install_recipe(
    install: OriginalInstall, destination: Path, region: str, cache_root: Path
) -> PlannedRecipe:
    """A copy of the install's recipe that npa-pulumi keeps (`destination`), as a cluster stack's recipe
    until the first `up` moves it to the default recipe: the stack then plans, refreshes and destroys with
    the recipe that made its state, whatever later happens to the original's files. Returns the planned
    recipe (its digest is the one the bridge checks its own materialization against)."""
    recipe = materialize(install_recipe(install), destination, region, cache_root)
    return PlannedRecipe(RecipeSource("dir", str(destination)), recipe.digest)


def _shown(key: str, value: Any) -> str:
    if any(word in key.lower() for word in _SECRET_WORDS):
        return "(secret)"
    masked = scrub(json.dumps(value, sort_keys=True, default=str))
    return masked if len(masked) <= 120 else masked[:117] + "..."
