"""Users' kubeconfigs and the cluster registry, under the npa home.

    <npa home>/kubeconfigs/<context>.yaml   one kubeconfig per deployed cluster, 0600
    <npa home>/clusters/<context>.json      its registration: fleet, project, cluster ids, stack, profile,
                                            cloud, API server and kubeconfig path (nothing secret)

`up` writes both for every cluster whose stack is deployed (fresh credentials from the cloud, never
copied out of state), `destroy` removes them once the cluster's stack is gone, and `npa-pulumi kubeconfig`
prints or merges them. Each write also registers the cluster where the original `npa fleet` did,
`<NPA_CONFIG_DIR or ~/.npa>/clusters/<context>/`, for the rest of `npa` to read
(engine/registrations/npa_records.py); each removal removes that record too, when it is this fleet's record
of that cluster.

A registration that belongs to another fleet's stack is never overwritten: two fleets whose names run
together (`a-b`/`c` and `a`/`b-c`) would otherwise share a context silently.

A registration is checked before it is used, not trusted (`identity_mismatches`): `verify-*` and
`kubeconfig` refuse a record whose stack, cloud or profile is not this run's, whose cluster id or project is
not what the cluster stack's outputs say now, or whose cluster the live cloud no longer has in that project
(a cluster re-created under the same name, a stack destroyed elsewhere): probing the wrong cluster would
"verify" something else.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.engine.registrations import npa_records
from npa_pulumi.errors import NpaError
from npa_pulumi.kube.kubeconfig import dump, write_private
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan.targets import Target
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home

log = logging.getLogger(__name__)


class KubeconfigConflict(NpaError):
    kind = "kubeconfig-conflict"


class StaleRegistration(NpaError):
    """A registered cluster record that no longer matches the stack's outputs or the live cloud."""

    kind = "stale-registration"


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
    # The original's record of this cluster (engine/registrations/npa_records.py) when this write made it,
    # else "".
    npa_record: str = ""


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


def write(
    port: Any,
    target: Target,
    *,
    context: str,
    cluster_id: str,
    project_id: str,
    cloud: str,
    profile: str,
    teardown_hint: str,
    warn: Callable[[str], None] | None = None,
) -> Registration:
    """Write the cluster's kubeconfig (0600) and registration, then the original's record of it; refuses a
    context another stack owns. A record of another cluster under the original's directory is left as it is
    and `warn` is told why (the kubeconfig and this registration stand)."""
    stack = target.cluster_stack
    existing = registered(context)
    if existing is not None and existing.stack != stack:
        raise KubeconfigConflict(
            f"kube context {context} is registered to stack {existing.stack} (fleet {existing.fleet}), "
            f"not {stack}: rename a project or cluster, or remove {registration_path(context)} if that "
            "fleet is gone"
        )
    text, server = kubeconfig_text(port, cluster_id, context)
    path = kubeconfig_path(context)
    write_private(path, text)
    npa = npa_records.register(
        port,
        npa_records.NpaRegistration(
            context=context,
            fleet=target.fleet,
            project_key=target.project_key,
            project_id=project_id,
            cluster_id=cluster_id,
            shape=npa_records.ClusterShape.of(target),
            teardown_hint=teardown_hint,
        ),
        text,
    )
    if npa.skipped:
        (warn or log.warning)(f"{stack}: {npa.skipped}")
    registration = Registration(
        context=context,
        fleet=target.fleet,
        project_key=target.project_key,
        project_id=project_id,
        cluster_name=target.cluster_name,
        cluster_id=cluster_id,
        stack=stack,
        cloud=cloud,
        profile=profile,
        server=server,
        kubeconfig=str(path),
        updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        npa_record=str(npa.directory) if npa.written else "",
    )
    record = registration_path(context)
    record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(record, json.dumps(registration.model_dump(), indent=2) + "\n", mode=0o600)
    return registration


def remove(context: str, stack: str, *, fleet: str, project_key: str, cluster_id: str = "") -> bool:
    """Forget the cluster's kubeconfig and registration when they are this stack's, and the original's
    record of it when that is this fleet's record of the cluster (`cluster_id`: the destroyed cluster, when
    the caller knows it; else the registration's). True if npa-pulumi's own registration was removed."""
    existing = registered(context)
    ours = existing is not None and existing.stack == stack
    known_id = cluster_id or (existing.cluster_id if existing is not None and ours else "")
    if npa_records.unregister(context, fleet=fleet, project_key=project_key, cluster_id=known_id):
        log.info("removed the npa registration of %s", context)
    if not ours:
        return False
    kubeconfig_path(context).unlink(missing_ok=True)
    registration_path(context).unlink(missing_ok=True)
    from npa_pulumi.engine.health.requalification import remove_record

    remove_record(context)  # `health --requalify`'s record goes with the registration it was made through
    return True


def identity_mismatches(
    registration: Registration,
    *,
    stack: str,
    cloud_name: str,
    profile: str,
    outputs: dict[str, Any] | None,
    cloud: Any,
) -> list[str]:
    """What about `registration` does not match this run (its stack, --cloud and --profile), the cluster
    stack's outputs now, and the live cloud: empty when it may be used."""
    context = registration.context
    found: list[str] = []
    if registration.stack != stack:
        found.append(f"{context} is registered to stack {registration.stack}, not {stack}")
    if registration.cloud != cloud_name:
        found.append(
            f"{context} was registered on cloud {registration.cloud!r}, this run uses --cloud {cloud_name}"
        )
    if registration.profile != profile:
        found.append(
            f"{context} was registered with profile {registration.profile or '(default)'!r}, this run uses "
            f"{profile or '(default)'!r} (--profile)"
        )
    if found:
        return found  # another cloud or principal: its outputs and live records are not comparable
    recorded = ClusterOutputs.read(outputs)
    live_id = recorded.cluster_id or ""
    if not live_id:
        found.append(
            f"stack {stack} has no deployed cluster (destroyed elsewhere?), but {context} is registered"
        )
    elif live_id != registration.cluster_id:
        found.append(
            f"{context} is registered for cluster id {registration.cluster_id}, but stack {stack} now holds "
            f"cluster {live_id} (re-created?)"
        )
    stack_project = recorded.project_id or ""
    if stack_project and registration.project_id and stack_project != registration.project_id:
        found.append(
            f"{context} is registered in project {registration.project_id}, but stack {stack} is in "
            f"project {stack_project}"
        )
    found.extend(_live_mismatches(registration, cloud))
    return found


def registration_problems(
    context: str, *, stack: str, cloud_name: str, profile: str, outputs: dict[str, Any] | None, cloud: Any
) -> list[str]:
    """For `kubeconfig`: the mismatches of `context`'s registration, when there is one (a machine that
    never ran `up` for the cluster has none, and takes the stack's outputs as they are)."""
    registration = registered(context)
    if registration is None:
        return []
    return identity_mismatches(
        registration, stack=stack, cloud_name=cloud_name, profile=profile, outputs=outputs, cloud=cloud
    )


def _live_mismatches(registration: Registration, cloud: Any) -> list[str]:
    context, cluster_id = registration.context, registration.cluster_id
    try:
        live = cloud.get_cluster(cluster_id)
    except NotFound:
        return [f"{context}'s registered cluster {cluster_id} no longer exists in the cloud"]
    except CloudError as err:
        return [f"{context}'s registered cluster {cluster_id} cannot be read from the cloud: {err}"]
    if registration.project_id and live.project_id != registration.project_id:
        return [
            f"{context}'s cluster {cluster_id} is in project {live.project_id} in the cloud, not the "
            f"registered {registration.project_id}"
        ]
    return []


def refuse_stale(mismatches: list[str]) -> str:
    return (
        "the registered cluster record does not match (nothing was probed): "
        + "; ".join(mismatches)
        + ". Run `npa-pulumi up` for this cluster again to register it afresh (or `npa-pulumi status` to see "
        "what the stack holds)"
    )
