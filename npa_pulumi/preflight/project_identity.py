"""Project identity for the whole selection, before anything mutates: every project the fleet names exists
in this tenant, is ACTIVE and not suspended, in its region; a named project is found once at most.

The original checks the same per project in its phase 1 (`iam project get`: parent is the tenant, region,
ACTIVE, suspension NONE, not deleting), so a wrong-tenant project fails mid-run while the projects before it
have mutated. Here one listing and one read per `project_id` judge them all first: preflight fails closed
(naming each project) and `up` creates nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from npa_pulumi.cloud.errors import CloudError, NotFound, PermissionDenied
from npa_pulumi.cloud.port import CloudPort, Project
from npa_pulumi.plan.targets import Target


def _problems(project: Project, tenant_id: str, region: str) -> list[str]:
    found = []
    if project.tenant_id != tenant_id:
        found.append(f"belongs to tenant {project.tenant_id}, not this fleet's {tenant_id}")
    if project.state != "ACTIVE":
        found.append(f"is {project.state}, not ACTIVE")
    if project.suspension_state != "NONE":
        found.append(f"is suspended ({project.suspension_state})")
    if region and project.region and project.region != region:
        found.append(f"is in region {project.region}, the spec's is {region}")
    return found


def project_identity_errors(cloud: CloudPort, tenant_id: str, targets: Sequence[Target]) -> list[str]:
    """One error per selected project that is not provably this fleet's to deploy into (empty: all are).
    A project given by name that does not exist yet is fine: `up` creates it."""
    errors: list[str] = []
    seen: set[str] = set()
    listing: list[Project] | None = None
    for target in targets:
        if target.project_key in seen:
            continue
        seen.add(target.project_key)
        label = f"project {target.project_key!r}"
        if target.project_id:
            try:
                project = cloud.get_project(target.project_id)
            except NotFound:
                errors.append(f"{label}: project_id {target.project_id} does not exist")
                continue
            except PermissionDenied:
                errors.append(
                    f"{label}: project {target.project_id} cannot be read with this fleet's credentials: "
                    f"not a project of tenant {tenant_id}"
                )
                continue
            except CloudError as err:
                errors.append(f"{label}: project {target.project_id} cannot be read: {err}")
                continue
            errors += [
                f"{label}: project {target.project_id} {p}"
                for p in _problems(project, tenant_id, target.region)
            ]
            continue
        if listing is None:
            try:
                listing = list(cloud.list_projects(tenant_id))
            except CloudError as err:
                return [*errors, f"the tenant's projects cannot be listed: {err}"]
        named = [p for p in listing if p.name == target.display_name]
        if len(named) > 1:
            ids = ", ".join(sorted(p.id for p in named))
            errors.append(
                f"{label}: {len(named)} projects are named {target.display_name!r} ({ids}); ambiguous, "
                "use an explicit project_id"
            )
        elif named:
            errors += [
                f"{label}: project {named[0].id} ({target.display_name!r}) {p}"
                for p in _problems(named[0], tenant_id, target.region)
            ]
    return errors
