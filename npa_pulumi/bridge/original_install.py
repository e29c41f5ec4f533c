"""What the original `npa fleet` left on disk for one (project, cluster), read (never written) for `adopt`.

The original keeps, per cluster, a Terraform install directory with local state under
`~/.npa/fleet/<fleet>/<project_key>/<cluster>/`:

    <cluster>/k8s-training/terraform.tfstate       Terraform's local state (the install dir)
    <cluster>/k8s-training/terraform.tfvars.json   the variables it applied
    <cluster>/.npa-fleet-env.json                  the env sidecar (optional): tenant, project, region,
                                                   subnet, profile, status, cluster_id, ...
    <project_key>/.npa-fleet-network.json          per project (optional): project_id, created_network_id,
                                                   subnet_id, profile
    <project_key>/.npa-fleet-object-storage.json   per project (optional): the project's bucket (bucket_id,
                                                   bucket_name, whether the original created it)

The state and tfvars are also accepted directly in `<cluster>/` (an install whose Terraform ran there). The
sidecar is optional: the identity it records (tenant, project, region, subnet) is otherwise read from the
state's cluster resource. Anything that cannot be read or parsed is refused with its path
(`OriginalInstallError`, bad input), never guessed around.

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

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.errors import UserInputError
from npa_pulumi.spec.names import slug

SIDECAR = ".npa-fleet-env.json"
NETWORK_RECORD = ".npa-fleet-network.json"
STORAGE_RECORD = ".npa-fleet-object-storage.json"
STATE_FILE = "terraform.tfstate"
TFVARS_FILE = "terraform.tfvars.json"
INSTALL_SUBDIR = "k8s-training"
# tfvars whose values are never shown (a mismatch says only that they differ).
_SECRET_WORDS = ("token", "secret", "password", "passphrase", "private_key", "ssh_public_key", "key_id")


class OriginalInstallError(UserInputError):
    """An install directory of the original tool that cannot be read as one (exit 2, nothing written)."""

    kind = "original-install"


@dataclass(frozen=True)
class Identity:
    """Where the original deployed the cluster: what its Terraform ran with."""

    tenant_id: str
    project_id: str
    region: str
    subnet_id: str


@dataclass(frozen=True)
class OriginalInstall:
    """One cluster's install as the original left it."""

    directory: Path  # <from>/<project>/<cluster>
    terraform_dir: Path  # where terraform.tfstate is
    state_text: str = field(repr=False)  # verbatim: it becomes the bridge's state
    tfvars: dict[str, Any]
    sidecar: dict[str, Any] | None
    network: dict[str, Any] | None  # the project's .npa-fleet-network.json, when there is one
    storage: dict[str, Any] | None  # the project's .npa-fleet-object-storage.json, when there is one
    identity: Identity
    cluster_id: str
    node_group_ids: tuple[str, ...]
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

    @property
    def recorded_bucket(self) -> tuple[str, str]:
        """(bucket id, bucket name) the original's storage record names ("" where it names none)."""
        record = self.storage or {}
        nested = record.get("bucket")
        bucket: dict[str, Any] = nested if isinstance(nested, dict) else {}
        return (
            str(record.get("bucket_id") or bucket.get("id") or ""),
            str(record.get("bucket_name") or bucket.get("name") or ""),
        )

    def bucket_created(self, bucket_id: str) -> bool:
        """Whether the original created this bucket (its record says so for this id): the ownership evidence
        a later `destroy --delete-buckets` needs. Without a record the bucket is bound, never owned."""
        record = self.storage or {}
        created = record.get("bucket_created", record.get("created"))
        return bool(bucket_id) and self.recorded_bucket[0] == bucket_id and created is True


def project_directory(root: Path, project_key: str, display_name: str, project_id: str | None) -> Path | None:
    """The directory under `root` that holds the project's clusters (see the module's docstring)."""
    for name in (project_key, slug(display_name), project_id or ""):
        if name and (root / name).is_dir():
            return root / name
    return None


def read_install(cluster_dir: Path) -> OriginalInstall:
    """Read one cluster's install: state, tfvars, sidecar and its project's network record."""
    terraform_dir = next(
        (d for d in (cluster_dir / INSTALL_SUBDIR, cluster_dir) if (d / STATE_FILE).is_file()), None
    )
    if terraform_dir is None:
        raise OriginalInstallError(
            f"{cluster_dir}: no Terraform state ({INSTALL_SUBDIR}/{STATE_FILE} or {STATE_FILE}); "
            "is this an install directory of `npa fleet`?"
        )
    digests: dict[str, str] = {}
    state_path = terraform_dir / STATE_FILE
    state_text = _read_text(state_path, digests)
    state = _parse_json(state_path, state_text)
    if not isinstance(state.get("resources"), list) or "serial" not in state:
        raise OriginalInstallError(f"{state_path}: not a Terraform state (no `serial` or `resources`)")
    tfvars_path = terraform_dir / TFVARS_FILE
    tfvars = _parse_json(tfvars_path, _read_text(tfvars_path, digests))
    sidecar = _optional_json(cluster_dir / SIDECAR, digests)
    network = _optional_json(cluster_dir.parent / NETWORK_RECORD, digests)
    storage = _optional_json(cluster_dir.parent / STORAGE_RECORD, digests)
    outputs = {name: (entry or {}).get("value") for name, entry in (state.get("outputs") or {}).items()}
    cluster_id = str(outputs.get("cluster_id") or (outputs.get("kube_cluster") or {}).get("id") or "")
    if not cluster_id:
        raise OriginalInstallError(
            f"{state_path}: the state records no cluster (no `cluster_id` output): the cluster was never "
            "created, or was destroyed"
        )
    return OriginalInstall(
        directory=cluster_dir,
        terraform_dir=terraform_dir,
        state_text=state_text,
        tfvars=tfvars,
        sidecar=sidecar,
        network=network,
        storage=storage,
        identity=_identity(state_path, state, sidecar),
        cluster_id=cluster_id,
        node_group_ids=tuple(str(i) for i in outputs.get("node_group_ids") or [] if i),
        digests=digests,
    )


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
    missing = [name for name, value in vars(identity).items() if not value]
    if missing:
        raise OriginalInstallError(
            f"{state_path}: cannot tell the cluster's {', '.join(missing)} (no sidecar {SIDECAR} records "
            "it and the state's cluster resource does not name it)"
        )
    return identity


def _state_identity(state: dict[str, Any]) -> dict[str, str]:
    """tenant_id, project_id/parent_id, region and subnet_id as the state's cluster resource holds them
    (the stand-in's request in `triggers_replace`; upstream's `nebius_mk8s_v1_cluster` attributes)."""
    found: dict[str, str] = {}
    for resource in state.get("resources") or []:
        name = f"{resource.get('type', '')}.{resource.get('name', '')}"
        if "cluster" not in name or "gpu_cluster" in name or "node_group" in name:
            continue
        for instance in resource.get("instances") or []:
            _collect(instance.get("attributes") or {}, found)
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


def tfvars_mismatches(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """The spec's tfvars against the saved ones, key by key; secrets and capacity-block ids masked."""
    found = []
    for key in sorted(set(saved) | set(wanted)):
        if key not in wanted:
            found.append(f"{key}: saved {_shown(key, saved[key])}, the spec renders none")
        elif key not in saved:
            found.append(f"{key}: the spec renders {_shown(key, wanted[key])}, the saved tfvars have none")
        elif saved[key] != wanted[key]:
            found.append(
                f"{key}: saved {_shown(key, saved[key])}, the spec renders {_shown(key, wanted[key])}"
            )
    return found


def _shown(key: str, value: Any) -> str:
    if any(word in key.lower() for word in _SECRET_WORDS):
        return "(secret)"
    masked = scrub(json.dumps(value, sort_keys=True, default=str))
    return masked if len(masked) <= 120 else masked[:117] + "..."
