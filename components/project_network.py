"""`ProjectNetwork`: the one subnet every cluster of a project uses — an existing subnet reused read-only,
or a network + subnet created and owned by the fleet when the project has none. It lives in the project
stack, so it is resolved once per project even when many cluster stacks deploy in parallel; an owned pair
is reclaimed when the project stack is destroyed, after its last cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi import Input

from npa_pulumi.components.args import FleetResourceArgs
from npa_pulumi.components.cloud_resources import Network, NetworkArgs


@dataclass(frozen=True, kw_only=True)
class ProjectNetworkArgs(FleetResourceArgs):
    project_id: Input[str]
    region: str
    # `adopt`: the subnet the adopted clusters run on, taken over instead of chosen, and whether the fleet
    # owns it (the original tool created its network). "": the usual choice.
    adopt_subnet_id: str = ""
    adopt_owned: bool = False


class ProjectNetwork(pulumi.ComponentResource):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    owned: pulumi.Output[bool]

    def __init__(
        self, name: str, args: ProjectNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {"fleet": args.fleet, "project_key": args.project_key}
        super().__init__("npa:fleet:ProjectNetwork", name, props, opts)
        binding = Network(
            f"{name}-binding",
            NetworkArgs(
                cloud=args.cloud,
                profile=args.profile,
                fleet=args.fleet,
                project_key=args.project_key,
                project_id=args.project_id,
                region=args.region,
                adopt_subnet_id=args.adopt_subnet_id,
                adopt_owned=args.adopt_owned,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.network_id = binding.network_id
        self.subnet_id = binding.subnet_id
        self.owned = binding.owned
        self.register_outputs(
            {"network_id": self.network_id, "subnet_id": self.subnet_id, "owned": self.owned}
        )
