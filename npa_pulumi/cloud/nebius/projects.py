"""The Nebius adapter's IAM projects, VPC networks, subnets and security groups, quotas and reserved
capacity."""

from __future__ import annotations

from ..port import (
    DEFAULT_OPERATION_TIMEOUT_S,
    CapacityBlockGroup,
    Network,
    Project,
    QuotaAllowance,
    SecurityGroup,
    Subnet,
)
from . import convert
from .client import (
    NebiusClient,
)


class ProjectsAndNetworks(NebiusClient):
    """The Nebius adapter's IAM projects, VPC networks and subnets, quotas and reserved capacity."""

    def default_region(self) -> str:
        """The region of the profile's `parent-id` project (one read); with federated auth, of the service
        account's own project; "" for a profile without one, a credentials file or a bare token. The Nebius
        CLI configuration has no region of its own."""
        parent = self.identity.parent_id
        if not parent and self.identity.kind == "federated":
            parent = self.home_project()
        return self.get_project(parent).region if parent else ""

    # ------------------------------------------------------------------ IAM projects

    def list_projects(self, tenant_id: str) -> list[Project]:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        items = self._list(
            "iam.v1.ProjectService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                iam.ListProjectsRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.project(c) for c in items]

    def get_project(self, project_id: str) -> Project:
        iam = self._api("iam.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        return convert.project(
            self._read(
                "iam.v1.ProjectService.Get",
                {"id": project_id},
                lambda kw: client.get(iam.GetProjectRequest(id=project_id), **kw),
            )
        )

    def create_project(
        self,
        tenant_id: str,
        name: str,
        region: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Project:
        iam, common = self._api("iam.v1"), self._api("common.v1")
        client = self._client("iam.v1", "ProjectServiceClient")
        request = iam.CreateProjectRequest(
            metadata=common.ResourceMetadata(parent_id=tenant_id, name=name, labels=labels or {}),
            spec=iam.ContainerSpec(region=region),
        )
        op = self._mutate(
            "iam.v1.ProjectService.Create",
            {"parent_id": tenant_id, "name": name, "region": region},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_project(op.resource_id)

    def delete_project(self, project_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        iam2 = self._api("iam.v2")
        client = self._client("iam.v2", "ProjectServiceClient")
        self._mutate(
            "iam.v2.ProjectService.Delete",
            {"id": project_id},
            lambda kw: client.delete(iam2.DeleteProjectRequest(id=project_id), **kw),
            timeout_s,
        )

    # ------------------------------------------------------------------ VPC

    def list_networks(self, project_id: str) -> list[Network]:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        items = self._list(
            "vpc.v1.NetworkService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                vpc.ListNetworksRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.network(n) for n in items]

    def get_network(self, network_id: str) -> Network:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        return convert.network(
            self._read(
                "vpc.v1.NetworkService.Get",
                {"id": network_id},
                lambda kw: client.get(vpc.GetNetworkRequest(id=network_id), **kw),
            )
        )

    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Network:
        vpc, common = self._api("vpc.v1"), self._api("common.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        # An empty spec asks for the default private pools, as `nebius vpc network create` does.
        request = vpc.CreateNetworkRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=vpc.NetworkSpec(),
        )
        op = self._mutate(
            "vpc.v1.NetworkService.Create",
            {"parent_id": project_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_network(op.resource_id)

    def delete_network(self, network_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "NetworkServiceClient")
        self._mutate(
            "vpc.v1.NetworkService.Delete",
            {"id": network_id},
            lambda kw: client.delete(vpc.DeleteNetworkRequest(id=network_id), **kw),
            timeout_s,
        )

    def list_subnets(self, project_id: str) -> list[Subnet]:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        items = self._list(
            "vpc.v1.SubnetService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                vpc.ListSubnetsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.subnet(s) for s in items]

    def get_subnet(self, subnet_id: str) -> Subnet:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        return convert.subnet(
            self._read(
                "vpc.v1.SubnetService.Get",
                {"id": subnet_id},
                lambda kw: client.get(vpc.GetSubnetRequest(id=subnet_id), **kw),
            )
        )

    def create_subnet(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Subnet:
        vpc, common = self._api("vpc.v1"), self._api("common.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        request = vpc.CreateSubnetRequest(
            metadata=common.ResourceMetadata(parent_id=project_id, name=name, labels=labels or {}),
            spec=vpc.SubnetSpec(
                network_id=network_id,
                ipv4_private_pools=vpc.IPv4PrivateSubnetPools(use_network_pools=True),
            ),
        )
        op = self._mutate(
            "vpc.v1.SubnetService.Create",
            {"parent_id": project_id, "network_id": network_id, "name": name},
            lambda kw: client.create(request, **kw),
            timeout_s,
        )
        return self.get_subnet(op.resource_id)

    def delete_subnet(self, subnet_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SubnetServiceClient")
        self._mutate(
            "vpc.v1.SubnetService.Delete",
            {"id": subnet_id},
            lambda kw: client.delete(vpc.DeleteSubnetRequest(id=subnet_id), **kw),
            timeout_s,
        )

    def list_security_groups(self, project_id: str) -> list[SecurityGroup]:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SecurityGroupServiceClient")
        items = self._list(
            "vpc.v1.SecurityGroupService.List",
            {"parent_id": project_id},
            lambda token, kw: client.list(
                vpc.ListSecurityGroupsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.security_group(g) for g in items]

    def delete_security_group(
        self, security_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None:
        vpc = self._api("vpc.v1")
        client = self._client("vpc.v1", "SecurityGroupServiceClient")
        self._mutate(
            "vpc.v1.SecurityGroupService.Delete",
            {"id": security_group_id},
            lambda kw: client.delete(vpc.DeleteSecurityGroupRequest(id=security_group_id), **kw),
            timeout_s,
        )

    # ------------------------------------------------------------------ quotas and reserved capacity

    def list_quota_allowances(self, tenant_id: str) -> list[QuotaAllowance]:
        quotas = self._api("quotas.v1")
        client = self._client("quotas.v1", "QuotaAllowanceServiceClient")
        items = self._list(
            "quotas.v1.QuotaAllowanceService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                quotas.ListQuotaAllowancesRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.quota_allowance(q, tenant_id) for q in items]

    def list_capacity_block_groups(self, tenant_id: str) -> list[CapacityBlockGroup]:
        capacity = self._api("capacity.v1")
        client = self._client("capacity.v1", "CapacityBlockGroupServiceClient")
        items = self._list(
            "capacity.v1.CapacityBlockGroupService.List",
            {"parent_id": tenant_id},
            lambda token, kw: client.list(
                capacity.ListCapacityBlockGroupsRequest(parent_id=tenant_id, **self._page_kwargs(token)), **kw
            ),
        )
        return [convert.capacity_block_group(b) for b in items]

    def get_capacity_block_group(self, block_id: str) -> CapacityBlockGroup:
        capacity = self._api("capacity.v1")
        client = self._client("capacity.v1", "CapacityBlockGroupServiceClient")
        return convert.capacity_block_group(
            self._read(
                "capacity.v1.CapacityBlockGroupService.Get",
                {"id": block_id},
                lambda kw: client.get(capacity.GetCapacityBlockGroupRequest(id=block_id), **kw),
            )
        )
