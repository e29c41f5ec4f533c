"""Users' kubeconfigs and the cluster registry, under the npa home.

    <npa home>/kubeconfigs/<context>.yaml   one kubeconfig per deployed cluster, 0600
    <npa home>/clusters/<context>.json      its registration: fleet, project, cluster ids, stack, profile,
                                            cloud, API server and kubeconfig path (nothing secret)

`up` writes both for every cluster whose stack is deployed (fresh credentials from the cloud, never
copied out of state), `destroy` removes them once the cluster's stack is gone, and `npa-pulumi kubeconfig`
prints or merges them. A registration that belongs to another fleet's stack is never overwritten: two
fleets whose names run together (`a-b`/`c` and `a`/`b-c`) would otherwise share a context silently.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from npa_pulumi.errors import NpaError
from npa_pulumi.kube.kubeconfig import dump, write_private
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home


class KubeconfigConflict(NpaError):
    kind = "kubeconfig-conflict"


class Registration(BaseModel):
    context: str
    fleet: str
    project_key: str
    project_id: str
    cluster_name: str
    cluster_id: str
    stack: str
    cloud: str
    profile: str
    server: str
    kubeconfig: str
    updated_at: str


def kubeconfig_path(context: str) -> Path:
    return npa_home() / "kubeconfigs" / f"{context}.yaml"


def registration_path(context: str) -> Path:
    return npa_home() / "clusters" / f"{context}.json"


def registered(context: str) -> Registration | None:
    try:
        return Registration.model_validate_json(registration_path(context).read_text())
    except (OSError, ValueError):
        return None


def kubeconfig_text(cloud: Any, cluster_id: str, context: str) -> tuple[str, str]:
    """(kubeconfig YAML, API server) for one cluster, from the cloud's current credentials."""
    access = cloud.cluster_access(cluster_id)
    return dump(access.kubeconfig(context)), access.server


def write(port: Any, *, context: str, stack: str, **fields: str) -> Registration:
    """Write the cluster's kubeconfig (0600) and registration; refuses a context another stack owns."""
    existing = registered(context)
    if existing is not None and existing.stack != stack:
        raise KubeconfigConflict(
            f"kube context {context} is registered to stack {existing.stack} (fleet {existing.fleet}), "
            f"not {stack}: rename a project or cluster, or remove {registration_path(context)} if that "
            "fleet is gone"
        )
    text, server = kubeconfig_text(port, fields["cluster_id"], context)
    path = kubeconfig_path(context)
    write_private(path, text)
    registration = Registration(
        context=context,
        stack=stack,
        server=server,
        kubeconfig=str(path),
        updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **fields,
    )
    target = registration_path(context)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(target, json.dumps(registration.model_dump(), indent=2) + "\n", mode=0o600)
    return registration


def remove(context: str, stack: str) -> bool:
    """Forget the cluster's kubeconfig and registration, when they are this stack's; True if removed."""
    existing = registered(context)
    if existing is None or existing.stack != stack:
        return False
    kubeconfig_path(context).unlink(missing_ok=True)
    registration_path(context).unlink(missing_ok=True)
    return True
