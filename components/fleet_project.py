"""`FleetProject`: the project a fleet deploys into — an existing one verified by id, or one found by
name (`prefix + name`) and created on demand. A project is never deleted by the fleet."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from npa_pulumi.components.args import FleetResourceArgs
from npa_pulumi.components.cloud_resources import Project, ProjectArgs


@dataclass(frozen=True, kw_only=True)
class FleetProjectArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    display_name: str
    project_id: str | None  # None: found by display name, or created when `create_missing`
    create_missing: bool = True


class FleetProject(pulumi.ComponentResource):
    project_id: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(self, name: str, args: FleetProjectArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {
            "fleet": args.fleet,
            "project_key": args.project_key,
            "display_name": args.display_name,
            "project_id": args.project_id or "",
            "region": args.region,
        }
        super().__init__("npa:fleet:FleetProject", name, props, opts)
        project = Project(
            f"{name}-project",
            ProjectArgs(
                cloud=args.cloud,
                profile=args.profile,
                fleet=args.fleet,
                project_key=args.project_key,
                tenant_id=args.tenant_id,
                region=args.region,
                display_name=args.display_name,
                project_id=args.project_id or "",
                create_missing=args.create_missing,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.project_id = project.resolved_id
        self.created = project.created
        self.register_outputs({"project_id": self.project_id, "created": self.created})
