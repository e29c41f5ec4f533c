"""A loopback gRPC server speaking the Nebius API subset the adapter uses, with the SDK's own messages.

Every handler is registered under the real service and method names (`nebius.iam.v1.ProjectService/
Create`, ...) and (de)serialises with the SDK's message classes. Around each handler the server
enforces what a real client must send:

* `authorization: Bearer <token>` naming a known principal (UNAUTHENTICATED otherwise), and access to
  the tenant the target lives in (PERMISSION_DENIED otherwise);
* a non-empty, existing `parent_id` on creates and lists (INVALID_ARGUMENT / NOT_FOUND);
* an `x-idempotency-key` on every mutation; a repeated key replays the first answer without a second
  effect, which is what makes a retried create safe;
* update calls are not served (the adapter issues none; a real update needs an `X-ResetMask`).

It can inject faults per method (before or after the effect), slow operations down, fail them, and
page lists at a small maximum page size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import jwt

from .fake import (
    Call,
    FakeError,
    FakeNebius,
    TokenInfo,
    capacity,
    common,
    compute,
    copy,
    iam,
    iam2,
    mk8s,
    new_id,
    quotas,
    registry,
    rpc_status,
    storage,
    vpc,
)

IDEMPOTENCY_HEADER = "x-idempotency-key"
PUBLIC_METHODS = {"nebius.iam.v1.TokenExchangeService/Exchange"}
FEDERATED_SUBJECT_TYPE = "urn:nebius:params:oauth:token-type:subject_identifier"


@dataclass(frozen=True)
class Handler:
    service: str
    method: str
    request_class: Any
    fn: Callable[[Any, TokenInfo], Any]
    mutation: bool = False

    @property
    def full_name(self) -> str:
        return f"{self.service}/{self.method}"


class WireServicers:
    """All handlers, bound to one FakeNebius."""

    def __init__(self, fake: FakeNebius) -> None:
        self.fake = fake

    # ------------------------------------------------------------------ shared checks and helpers

    def _require(self, value: str, what: str) -> str:
        if not value:
            raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, f"{what} is required")
        return value

    def _parent(self, parent_id: str, token: TokenInfo, table: dict[str, Any] | None = None) -> str:
        self._require(parent_id, "parent_id")
        if table is not None and parent_id not in table:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"parent {parent_id} not found")
        self.fake.check_access(token, parent_id)
        return parent_id

    def _get(self, table: dict[str, Any], resource_id: str, token: TokenInfo, kind: str) -> Any:
        self._require(resource_id, "id")
        if resource_id not in table:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"{kind} {resource_id} not found")
        self.fake.check_access(token, resource_id)
        return table[resource_id]

    def _page(self, items: list[Any], request: Any, response_class: Any, field: str = "items") -> Any:
        size = int(request.page_size) or self.fake.max_page_size
        size = min(size, self.fake.max_page_size)
        token = request.page_token
        start = 0
        if token:
            if not token.startswith("page:") or not token[5:].isdigit():
                raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, f"bad page_token {token!r}")
            start = int(token[5:])
        ordered = sorted(items, key=lambda m: m.metadata.id)
        chunk = ordered[start : start + size]
        nxt = f"page:{start + size}" if start + size < len(ordered) else ""
        return response_class(**{field: [copy(m) for m in chunk]}, next_page_token=nxt)

    def _children(self, table: dict[str, Any], parent_id: str) -> list[Any]:
        return [m for m in table.values() if m.metadata.parent_id == parent_id]

    def _unique_name(self, table: dict[str, Any], parent_id: str, name: str) -> None:
        self._require(name, "metadata.name")
        for m in table.values():
            if m.metadata.parent_id == parent_id and m.metadata.name == name:
                raise FakeError(grpc.StatusCode.ALREADY_EXISTS, f"{name!r} already exists in {parent_id}")

    def _by_name(self, table: dict[str, Any], parent_id: str, name: str, token: TokenInfo, kind: str) -> Any:
        self._parent(parent_id, token)
        self._require(name, "name")
        for m in table.values():
            if m.metadata.parent_id == parent_id and m.metadata.name == name:
                return copy(m)
        raise FakeError(grpc.StatusCode.NOT_FOUND, f"{kind} {name!r} not found in {parent_id}")

    def _meta(self, request: Any, rid: str) -> Any:
        m = request.metadata
        return common.ResourceMetadata(
            id=rid, parent_id=m.parent_id, name=m.name, labels=dict(m.labels), resource_version=1
        )

    def _region_of_project(self, project_id: str) -> str:
        region: str = self.fake.projects[project_id].spec.region
        return region

    # ------------------------------------------------------------------ IAM

    def profile_get(self, request: Any, token: TokenInfo) -> Any:
        if token.kind == "service_account":
            return iam.GetProfileResponse(
                service_account_profile=iam.ServiceAccountProfile(
                    info=iam.ServiceAccount(
                        metadata=common.ResourceMetadata(id=token.subject, parent_id=token.project_id)
                    )
                )
            )
        return iam.GetProfileResponse(
            user_profile=iam.UserProfile(
                id=token.subject, tenants=[iam.UserTenantInfo(tenant_id=t) for t in sorted(token.tenants)]
            )
        )

    def token_exchange(self, request: Any, token: TokenInfo) -> Any:
        """RFC 8693 as the SDK sends it: a service account's self-signed JWT as the subject token, or
        (federated credentials) the account's id as the subject and an external OIDC token as the actor."""
        if request.subject_token_type == FEDERATED_SUBJECT_TYPE:
            sa_id = self._federated_subject(request)
            via = "federated"
        else:
            sa_id = self._key_subject(request)
            via = "key"
        sa = self.fake.service_accounts[sa_id]
        project_id = sa.metadata.parent_id
        access = "sa-token-" + new_id("t")
        life = self.fake.exchanged_token_life_s
        self.fake.add_token(
            access,
            sa_id,
            {self.fake.tenant_of(project_id) or ""},
            "service_account",
            project_id,
            expires_at=time.time() + life,
            via=via,
        )
        return iam.CreateTokenResponse(
            access_token=access,
            issued_token_type="urn:ietf:params:oauth:token-type:access_token",
            token_type="Bearer",
            expires_in=life,
        )

    def _key_subject(self, request: Any) -> str:
        header = jwt.get_unverified_header(request.subject_token)
        kid = header.get("kid", "")
        if kid not in self.fake.sa_public_keys:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "unknown public key")
        sa_id, pem = self.fake.sa_public_keys[kid]
        try:
            claims = jwt.decode(
                request.subject_token, pem, algorithms=["RS256"], options={"verify_aud": False}
            )
        except jwt.PyJWTError as exc:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, f"bad subject token: {exc}") from None
        if claims.get("sub") != sa_id or claims.get("iss") != sa_id:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "subject token names another account")
        return sa_id

    def _federated_subject(self, request: Any) -> str:
        """The account named as subject, when federated credentials of it trust the actor token's issuer and
        `sub`, the signature verifies against that issuer's JWKS, and the token is current and (when the
        fake has one) for the accepted audience."""
        sa_id = request.subject_token
        if sa_id not in self.fake.service_accounts:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "unknown service account")
        if request.actor_token_type != "urn:ietf:params:oauth:token-type:jwt" or not request.actor_token:
            raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, "a JWT actor token is required")
        try:
            unverified = jwt.decode(request.actor_token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "the actor token is not a JWT") from None
        issuer, subject = unverified.get("iss", ""), unverified.get("sub", "")
        trusted = [
            c
            for c in self.fake.federated_credentials.values()
            if c.spec.subject_id == sa_id and c.spec.oidc_provider.issuer_url == issuer
        ]
        if not trusted:
            raise FakeError(
                grpc.StatusCode.UNAUTHENTICATED, f"no federated credentials of {sa_id} trust issuer {issuer}"
            )
        matching = [c for c in trusted if c.spec.federated_subject_id == subject]
        if not matching:
            raise FakeError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"subject {subject!r} of {issuer} may not act as {sa_id}",
            )
        keys = jwt.PyJWKSet.from_json(matching[0].spec.oidc_provider.jwk_set_json)
        kid = jwt.get_unverified_header(request.actor_token).get("kid", "")
        key = next((k for k in keys.keys if k.key_id == kid), None)
        if key is None:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "the actor token's key is not in the JWKS")
        audience = self.fake.federated_audience
        try:
            jwt.decode(
                request.actor_token,
                key.key,
                algorithms=["RS256"],
                audience=audience,
                options={"verify_aud": audience is not None, "require": ["exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "the actor token has expired") from None
        except jwt.InvalidAudienceError:
            raise FakeError(
                grpc.StatusCode.UNAUTHENTICATED, f"the actor token is not for audience {audience}"
            ) from None
        except jwt.PyJWTError as exc:
            reason = type(exc).__name__
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, f"bad actor token: {reason}") from None
        return str(sa_id)

    def project_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.tenants)
        return self._page(
            self._children(self.fake.projects, request.parent_id), request, iam.ListProjectsResponse
        )

    def project_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.projects, request.id, token, "project"))

    def project_create(self, request: Any, token: TokenInfo) -> Any:
        tenant = self._parent(request.metadata.parent_id, token, self.fake.tenants)
        self._unique_name(self.fake.projects, tenant, request.metadata.name)
        self._require(request.spec.region, "spec.region")
        pid = new_id("project")
        project = iam.Container(
            metadata=self._meta(request, pid),
            spec=iam.ContainerSpec(region=request.spec.region),
            status=iam.ContainerStatus(
                container_state=iam.State.CREATING,
                suspension_state=iam.SuspensionState.NONE,
                region=request.spec.region,
            ),
        )
        self.fake.projects[pid] = project

        def done() -> None:
            project.status.container_state = iam.State.ACTIVE

        return self.fake.start_operation("ProjectService/Create", pid, "create project", done)

    def project_delete(self, request: Any, token: TokenInfo) -> Any:
        self._get(self.fake.projects, request.id, token, "project")
        held = [
            rid
            for table in (
                self.fake.networks,
                self.fake.subnets,
                self._live_buckets(),
                self.fake.service_accounts,
                self.fake.clusters,
                self.fake.groups,
                self.fake.security_groups,
                self.fake.instances,
                self.fake.disks,
                self.fake.registries,
                self.fake.filesystems,
                self.fake.gpu_clusters,
            )
            for rid, m in table.items()
            if m.metadata.parent_id == request.id
        ]
        if held:
            raise FakeError(grpc.StatusCode.FAILED_PRECONDITION, f"project {request.id} is not empty: {held}")
        return self.fake.start_operation(
            "ProjectService/Delete",
            request.id,
            "delete project",
            lambda: _discard(self.fake.projects, request.id),
        )

    def sa_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.service_accounts, request.parent_id),
            request,
            iam.ListServiceAccountResponse,
        )

    def key_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        keys = [
            self.fake.key_view(s)
            for s in self.fake.access_keys.values()
            if s.key.metadata.parent_id == request.parent_id
        ]
        return self._page(keys, request, iam2.ListAccessKeysResponse)

    def sa_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.service_accounts, request.id, token, "service account"))

    def sa_get_by_name(self, request: Any, token: TokenInfo) -> Any:
        return self._by_name(
            self.fake.service_accounts, request.parent_id, request.name, token, "service account"
        )

    def sa_create(self, request: Any, token: TokenInfo) -> Any:
        project = self._parent(request.metadata.parent_id, token, self.fake.projects)
        self._unique_name(self.fake.service_accounts, project, request.metadata.name)
        sid = new_id("serviceaccount")
        self.fake.service_accounts[sid] = iam.ServiceAccount(
            metadata=self._meta(request, sid),
            spec=copy(request.spec),
            status=iam.ServiceAccountStatus(active=True),
        )
        return self.fake.start_operation("ServiceAccountService/Create", sid, "create service account")

    def sa_delete(self, request: Any, token: TokenInfo) -> Any:
        self._get(self.fake.service_accounts, request.id, token, "service account")

        def done() -> None:
            self.fake.service_accounts.pop(request.id, None)
            for kid in [
                k
                for k, s in self.fake.access_keys.items()
                if s.key.spec.account.service_account.id == request.id
            ]:
                self.fake.drop_access_key(kid)

        return self.fake.start_operation(
            "ServiceAccountService/Delete", request.id, "delete service account", done
        )

    def _may_manage_keys_of(self, token: TokenInfo, sa_id: str, project: str) -> None:
        """A service account manages access keys only of itself, and only with the grant to
        (`access_key_creators`); a user's token (the profile's) is not restricted here."""
        if token.kind != "service_account":
            return
        if sa_id != token.subject:
            raise FakeError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{token.subject} may not manage access keys of another account ({sa_id})",
            )
        if token.subject not in self.fake.access_key_creators:
            raise FakeError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{token.subject} has no permission to create access keys in project {project}",
            )

    def key_create(self, request: Any, token: TokenInfo) -> Any:
        project = self._parent(request.metadata.parent_id, token, self.fake.projects)
        sa_id = self._require(request.spec.account.service_account.id, "spec.account.service_account.id")
        sa = self.fake.service_accounts.get(sa_id)
        if sa is None or sa.metadata.parent_id != project:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"service account {sa_id} not found in {project}")
        self._may_manage_keys_of(token, sa_id, project)
        if request.spec.HasField("expires_at") and request.spec.expires_at.timestamp() <= time.time():
            raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, "spec.expires_at must be in the future")
        state = self.fake.new_access_key(project, sa_id, copy(request.spec))
        state.key.metadata.name = request.metadata.name
        return self.fake.start_operation(
            "AccessKeyService/Create", state.key.metadata.id, "create access key"
        )

    def key_get(self, request: Any, token: TokenInfo) -> Any:
        self._require(request.id, "id")
        state = self.fake.access_keys.get(request.id)
        if state is None:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"access key {request.id} not found")
        self.fake.check_access(token, request.id)
        return self.fake.key_view(state)

    def key_get_secret(self, request: Any, token: TokenInfo) -> Any:
        key = self.key_get(request, token)
        self._may_manage_keys_of(token, key.spec.account.service_account.id, key.metadata.parent_id)
        state = self.fake.access_keys[request.id]
        if state.key.spec.secret_delivery_mode != iam2.SecretDeliveryMode.EXPLICIT:
            raise FakeError(
                grpc.StatusCode.FAILED_PRECONDITION, "the key was not created for explicit delivery"
            )
        if state.secret_fetched:
            raise FakeError(grpc.StatusCode.FAILED_PRECONDITION, "the secret was already delivered")
        state.secret_fetched = True
        return iam2.GetAccessKeySecretResponse(
            aws_access_key_id=state.key.status.aws_access_key_id, secret=state.secret
        )

    def key_delete(self, request: Any, token: TokenInfo) -> Any:
        key = self.key_get(request, token)
        self._may_manage_keys_of(token, key.spec.account.service_account.id, key.metadata.parent_id)
        return self.fake.start_operation(
            "AccessKeyService/Delete",
            request.id,
            "delete access key",
            lambda: self.fake.drop_access_key(request.id),
        )

    # ------------------------------------------------------------------ IAM groups and access permits

    def group_get_by_name(self, request: Any, token: TokenInfo) -> Any:
        return self._by_name(self.fake.groups, request.parent_id, request.name, token, "group")

    def group_create(self, request: Any, token: TokenInfo) -> Any:
        parent = request.metadata.parent_id
        if parent not in self.fake.projects and parent not in self.fake.tenants:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"parent {parent} not found")
        self._parent(parent, token)
        self._unique_name(self.fake.groups, parent, request.metadata.name)
        gid = new_id("group")
        self.fake.groups[gid] = iam.Group(metadata=self._meta(request, gid), spec=iam.GroupSpec())
        return self.fake.start_operation("GroupService/Create", gid, "create group")

    def group_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.groups, request.parent_id), request, iam.ListGroupsResponse
        )

    def group_delete(self, request: Any, token: TokenInfo) -> Any:
        self._get(self.fake.groups, request.id, token, "group")

        def done() -> None:  # its memberships and access permits go with it
            self.fake.groups.pop(request.id, None)
            for table in (self.fake.memberships, self.fake.permits):
                for key in [k for k, m in table.items() if m.metadata.parent_id == request.id]:
                    del table[key]

        return self.fake.start_operation("GroupService/Delete", request.id, "delete group", done)

    def membership_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.groups)
        members = self._children(self.fake.memberships, request.parent_id)
        return self._page(members, request, iam.ListGroupMembershipsResponse, field="memberships")

    def membership_create(self, request: Any, token: TokenInfo) -> Any:
        group = self._parent(request.metadata.parent_id, token, self.fake.groups)
        member = self._require(request.spec.member_id, "spec.member_id")
        if member not in self.fake.service_accounts:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"member {member} not found")
        if any(m.spec.member_id == member for m in self._children(self.fake.memberships, group)):
            raise FakeError(grpc.StatusCode.ALREADY_EXISTS, f"{member} is already a member of {group}")
        mid = new_id("groupmembership")
        self.fake.memberships[mid] = iam.GroupMembership(
            metadata=self._meta(request, mid), spec=iam.GroupMembershipSpec(member_id=member)
        )
        return self.fake.start_operation("GroupMembershipService/Create", mid, "add group member")

    def permit_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.groups)
        permits = self._children(self.fake.permits, request.parent_id)
        return self._page(permits, request, iam.ListAccessPermitResponse)

    def permit_create(self, request: Any, token: TokenInfo) -> Any:
        group = self._parent(request.metadata.parent_id, token, self.fake.groups)
        resource = self._require(request.spec.resource_id, "spec.resource_id")
        role = self._require(request.spec.role, "spec.role")
        if self.fake.tenant_of(resource) is None:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"resource {resource} not found")
        if self.fake.tenant_of(resource) != self.fake.tenant_of(group):
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"{group} is not in {resource}'s hierarchy")
        pid = new_id("accesspermit")
        self.fake.permits[pid] = iam.AccessPermit(
            metadata=self._meta(request, pid), spec=iam.AccessPermitSpec(resource_id=resource, role=role)
        )
        return self.fake.start_operation("AccessPermitService/Create", pid, "create access permit")

    # ------------------------------------------------------------------ VPC

    def network_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.networks, request.parent_id), request, vpc.ListNetworksResponse
        )

    def network_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.networks, request.id, token, "network"))

    def network_create(self, request: Any, token: TokenInfo) -> Any:
        project = self._parent(request.metadata.parent_id, token, self.fake.projects)
        self._unique_name(self.fake.networks, project, request.metadata.name)
        nid = new_id("vpcnetwork")
        self.fake.consume(
            self.fake.tenant_of(project) or "", "vpc.network.count", self._region_of_project(project), 1
        )
        network = vpc.Network(
            metadata=self._meta(request, nid),
            spec=copy(request.spec),
            status=vpc.NetworkStatus(state=vpc.NetworkStatus.State.CREATING),
        )
        self.fake.networks[nid] = network

        def done() -> None:
            network.status.state = vpc.NetworkStatus.State.READY

        return self.fake.start_operation("NetworkService/Create", nid, "create network", done)

    def network_delete(self, request: Any, token: TokenInfo) -> Any:
        network = self._get(self.fake.networks, request.id, token, "network")
        if any(s.spec.network_id == request.id for s in self.fake.subnets.values()):
            raise FakeError(grpc.StatusCode.FAILED_PRECONDITION, f"network {request.id} still has subnets")
        groups = self.fake.security_groups.values()
        if any(g.spec.network_id == request.id and not g.status.default for g in groups):
            raise FakeError(
                grpc.StatusCode.FAILED_PRECONDITION, f"network {request.id} still has security groups"
            )
        project = network.metadata.parent_id

        def done() -> None:
            self.fake.networks.pop(request.id, None)
            for key in [k for k, g in self.fake.security_groups.items() if g.spec.network_id == request.id]:
                del self.fake.security_groups[key]  # the network's default one goes with it
            self.fake.consume(
                self.fake.tenant_of(project) or "", "vpc.network.count", self._region_of_project(project), -1
            )

        return self.fake.start_operation("NetworkService/Delete", request.id, "delete network", done)

    def security_group_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.security_groups, request.parent_id),
            request,
            vpc.ListSecurityGroupsResponse,
        )

    def security_group_delete(self, request: Any, token: TokenInfo) -> Any:
        group = self._get(self.fake.security_groups, request.id, token, "security group")
        if group.status.default:
            raise FakeError(
                grpc.StatusCode.FAILED_PRECONDITION, f"security group {request.id} is its network's default"
            )
        return self.fake.start_operation(
            "SecurityGroupService/Delete",
            request.id,
            "delete security group",
            lambda: _discard(self.fake.security_groups, request.id),
        )

    def subnet_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.subnets, request.parent_id), request, vpc.ListSubnetsResponse
        )

    def subnet_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.subnets, request.id, token, "subnet"))

    def subnet_create(self, request: Any, token: TokenInfo) -> Any:
        project = self._parent(request.metadata.parent_id, token, self.fake.projects)
        self._unique_name(self.fake.subnets, project, request.metadata.name)
        network_id = self._require(request.spec.network_id, "spec.network_id")
        network = self.fake.networks.get(network_id)
        if network is None or network.metadata.parent_id != project:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"network {network_id} not found in {project}")
        sid = new_id("vpcsubnet")
        subnet = vpc.Subnet(
            metadata=self._meta(request, sid),
            spec=copy(request.spec),
            status=vpc.SubnetStatus(
                state=vpc.SubnetStatus.State.CREATING, ipv4_private_cidrs=[self.fake.next_cidr()]
            ),
        )
        self.fake.subnets[sid] = subnet

        def done() -> None:
            subnet.status.state = vpc.SubnetStatus.State.READY

        return self.fake.start_operation("SubnetService/Create", sid, "create subnet", done)

    def subnet_delete(self, request: Any, token: TokenInfo) -> Any:
        self._get(self.fake.subnets, request.id, token, "subnet")
        return self.fake.start_operation(
            "SubnetService/Delete",
            request.id,
            "delete subnet",
            lambda: _discard(self.fake.subnets, request.id),
        )

    # ------------------------------------------------------------------ quotas and capacity

    def quota_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.tenants)
        return self._page(
            self.fake.quota_allowances.get(request.parent_id, []), request, quotas.ListQuotaAllowancesResponse
        )

    def capacity_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.tenants)
        return self._page(
            self._children(self.fake.capacity_blocks, request.parent_id),
            request,
            capacity.ListCapacityBlockGroupsResponse,
        )

    def capacity_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.capacity_blocks, request.id, token, "capacity block group"))

    # ------------------------------------------------------------------ storage

    def _live_buckets(self) -> dict[str, Any]:
        live = storage.BucketStatus.State.SCHEDULED_FOR_DELETION
        return {k: b for k, b in self.fake.buckets.items() if b.status.state != live}

    def bucket_get(self, request: Any, token: TokenInfo) -> Any:
        bucket = copy(self._get(self.fake.buckets, request.id, token, "bucket"))
        # The API reports what a bucket holds in per-storage-class counters.
        held = len(self.fake.objects.get(bucket.metadata.name, {}))
        bucket.status.counters = [
            storage.BucketCounters(
                storage_class=bucket.spec.default_storage_class,
                counters=storage.CurrentBucketCounters(simple_objects_quantity=held),
            )
        ]
        return bucket

    def bucket_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self._live_buckets(), request.parent_id), request, storage.ListBucketsResponse
        )

    def bucket_get_by_name(self, request: Any, token: TokenInfo) -> Any:
        return self._by_name(self._live_buckets(), request.parent_id, request.name, token, "bucket")

    def bucket_create(self, request: Any, token: TokenInfo) -> Any:
        project = self._parent(request.metadata.parent_id, token, self.fake.projects)
        self._unique_name(self._live_buckets(), project, request.metadata.name)
        spec = request.spec
        if spec.default_storage_class == storage.StorageClass.STORAGE_CLASS_UNSPECIFIED:
            raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, "spec.default_storage_class is required")
        if spec.max_size_bytes <= 0:
            raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, "spec.max_size_bytes must be positive")
        tenant = self.fake.tenant_of(project) or ""
        region = self._region_of_project(project)
        self.fake.consume(tenant, "storage.bucket.count", region, 1)
        bid = new_id("bucket")
        bucket = storage.Bucket(
            metadata=self._meta(request, bid),
            spec=copy(spec),
            status=storage.BucketStatus(
                state=storage.BucketStatus.State.CREATING,
                suspension_state=storage.BucketStatus.SuspensionState.NOT_SUSPENDED,
                region=region,
                domain_name=f"{request.metadata.name}.storage.{region}.nebius.cloud",
            ),
        )
        self.fake.buckets[bid] = bucket

        def done() -> None:
            bucket.status.state = storage.BucketStatus.State.ACTIVE
            self.fake.objects.setdefault(request.metadata.name, {})

        return self.fake.start_operation("BucketService/Create", bid, "create bucket", done)

    def bucket_delete(self, request: Any, token: TokenInfo) -> Any:
        bucket = self._get(self.fake.buckets, request.id, token, "bucket")
        project = bucket.metadata.parent_id

        def done() -> None:
            bucket.status.state = storage.BucketStatus.State.SCHEDULED_FOR_DELETION
            self.fake.objects.pop(bucket.metadata.name, None)
            self.fake.consume(
                self.fake.tenant_of(project) or "", "storage.bucket.count", bucket.status.region, -1
            )

        return self.fake.start_operation("BucketService/Delete", request.id, "delete bucket", done)

    # ------------------------------------------------------------------ mk8s and compute

    def cluster_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.clusters, request.id, token, "cluster"))

    def cluster_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.clusters, request.parent_id), request, mk8s.ListClustersResponse
        )

    def cluster_delete(self, request: Any, token: TokenInfo) -> Any:
        cluster = self._get(self.fake.clusters, request.id, token, "cluster")
        cluster.status.state = mk8s.ClusterStatus.State.DELETING

        def done() -> None:
            self.fake.clusters.pop(request.id, None)
            for nid in [n for n, g in self.fake.node_groups.items() if g.metadata.parent_id == request.id]:
                del self.fake.node_groups[nid]

        return self.fake.start_operation("ClusterService/Delete", request.id, "delete cluster", done)

    def node_group_get(self, request: Any, token: TokenInfo) -> Any:
        return copy(self._get(self.fake.node_groups, request.id, token, "node group"))

    def node_group_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.clusters)
        return self._page(
            self._children(self.fake.node_groups, request.parent_id), request, mk8s.ListNodeGroupsResponse
        )

    def node_group_delete(self, request: Any, token: TokenInfo) -> Any:
        group = self._get(self.fake.node_groups, request.id, token, "node group")
        group.status.state = mk8s.NodeGroupStatus.State.DELETING
        return self.fake.start_operation(
            "NodeGroupService/Delete",
            request.id,
            "delete node group",
            lambda: _discard(self.fake.node_groups, request.id),
        )

    def filesystem_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.filesystems, request.parent_id), request, compute.ListFilesystemsResponse
        )

    def gpu_cluster_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.gpu_clusters, request.parent_id),
            request,
            compute.ListGpuClustersResponse,
        )

    def instance_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.instances, request.parent_id), request, compute.ListInstancesResponse
        )

    def instance_get_by_name(self, request: Any, token: TokenInfo) -> Any:
        return self._by_name(self.fake.instances, request.parent_id, request.name, token, "instance")

    def _instance_state(self, request: Any, token: TokenInfo, verb: str, state: Any, ok: Any) -> Any:
        instance = self._get(self.fake.instances, request.id, token, "instance")
        if instance.status.state != ok:
            raise FakeError(
                grpc.StatusCode.FAILED_PRECONDITION, f"instance {request.id} is {instance.status.state.name}"
            )

        def done() -> None:
            instance.status.state = state

        return self.fake.start_operation(f"InstanceService/{verb}", request.id, f"{verb} instance", done)

    def instance_stop(self, request: Any, token: TokenInfo) -> Any:
        states = compute.InstanceStatus.InstanceState
        return self._instance_state(request, token, "Stop", states.STOPPED, states.RUNNING)

    def instance_start(self, request: Any, token: TokenInfo) -> Any:
        states = compute.InstanceStatus.InstanceState
        return self._instance_state(request, token, "Start", states.RUNNING, states.STOPPED)

    def instance_delete(self, request: Any, token: TokenInfo) -> Any:
        instance = self._get(self.fake.instances, request.id, token, "instance")
        instance.status.state = compute.InstanceStatus.InstanceState.DELETING
        return self.fake.start_operation(
            "InstanceService/Delete",
            request.id,
            "delete instance",
            lambda: _discard(self.fake.instances, request.id),
        )

    def node_set_unhealthy(self, request: Any, token: TokenInfo) -> Any:
        self._get(self.fake.instances, request.instance_id, token, "instance")
        if self.fake.set_unhealthy_denied:
            raise FakeError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{token.subject} lacks compute.node.setUnhealthy on {request.instance_id}",
            )
        if not request.dry_run:
            self.fake.unhealthy_hosts.setdefault(request.instance_id, []).append(request.health_check_info)
        return compute.NodeSetUnhealthyResponse()

    def maintenance_list_active(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        events = sorted(
            (e for project, e in self.fake.maintenance_events.values() if project == request.parent_id),
            key=lambda e: e.id,
        )
        size = min(int(request.page_size) or self.fake.max_page_size, self.fake.max_page_size)
        start = int(request.page_token[5:]) if request.page_token.startswith("page:") else 0
        nxt = f"page:{start + size}" if start + size < len(events) else ""
        chunk = [copy(e) for e in events[start : start + size]]
        return compute.ListMaintenanceEventsResponse(items=chunk, next_page_token=nxt)

    def disk_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.disks, request.parent_id), request, compute.ListDisksResponse
        )

    def registry_list(self, request: Any, token: TokenInfo) -> Any:
        self._parent(request.parent_id, token, self.fake.projects)
        return self._page(
            self._children(self.fake.registries, request.parent_id), request, registry.ListRegistriesResponse
        )

    def operation_get(self, request: Any, token: TokenInfo) -> Any:
        return self.fake.poll_operation(self._require(request.id, "id"))

    # ------------------------------------------------------------------ the table

    def handlers(self) -> list[Handler]:
        h = Handler
        return [
            h("nebius.iam.v1.ProfileService", "Get", iam.GetProfileRequest, self.profile_get),
            h(
                "nebius.iam.v1.TokenExchangeService",
                "Exchange",
                iam.ExchangeTokenRequest,
                self.token_exchange,
            ),
            h("nebius.iam.v1.ProjectService", "List", iam.ListProjectsRequest, self.project_list),
            h("nebius.iam.v1.ProjectService", "Get", iam.GetProjectRequest, self.project_get),
            h("nebius.iam.v1.ProjectService", "Create", iam.CreateProjectRequest, self.project_create, True),
            h("nebius.iam.v2.ProjectService", "Delete", iam2.DeleteProjectRequest, self.project_delete, True),
            h("nebius.iam.v1.ServiceAccountService", "List", iam.ListServiceAccountRequest, self.sa_list),
            h("nebius.iam.v2.AccessKeyService", "List", iam2.ListAccessKeysRequest, self.key_list),
            h("nebius.storage.v1.BucketService", "List", storage.ListBucketsRequest, self.bucket_list),
            h("nebius.iam.v1.ServiceAccountService", "Get", iam.GetServiceAccountRequest, self.sa_get),
            h(
                "nebius.iam.v1.ServiceAccountService",
                "GetByName",
                iam.GetServiceAccountByNameRequest,
                self.sa_get_by_name,
            ),
            h(
                "nebius.iam.v1.ServiceAccountService",
                "Create",
                iam.CreateServiceAccountRequest,
                self.sa_create,
                True,
            ),
            h(
                "nebius.iam.v1.ServiceAccountService",
                "Delete",
                iam.DeleteServiceAccountRequest,
                self.sa_delete,
                True,
            ),
            h("nebius.iam.v2.AccessKeyService", "Create", iam2.CreateAccessKeyRequest, self.key_create, True),
            h("nebius.iam.v1.GroupService", "GetByName", iam.GetGroupByNameRequest, self.group_get_by_name),
            h("nebius.iam.v1.GroupService", "Create", iam.CreateGroupRequest, self.group_create, True),
            h("nebius.iam.v1.GroupService", "List", iam.ListGroupsRequest, self.group_list),
            h("nebius.iam.v1.GroupService", "Delete", iam.DeleteGroupRequest, self.group_delete, True),
            h(
                "nebius.iam.v1.GroupMembershipService",
                "ListMembers",
                iam.ListGroupMembershipsRequest,
                self.membership_list,
            ),
            h(
                "nebius.iam.v1.GroupMembershipService",
                "Create",
                iam.CreateGroupMembershipRequest,
                self.membership_create,
                True,
            ),
            h("nebius.iam.v1.AccessPermitService", "List", iam.ListAccessPermitRequest, self.permit_list),
            h(
                "nebius.iam.v1.AccessPermitService",
                "Create",
                iam.CreateAccessPermitRequest,
                self.permit_create,
                True,
            ),
            h("nebius.iam.v2.AccessKeyService", "Get", iam2.GetAccessKeyRequest, self.key_get),
            h(
                "nebius.iam.v2.AccessKeyService",
                "GetSecret",
                iam2.GetAccessKeySecretRequest,
                self.key_get_secret,
            ),
            h("nebius.iam.v2.AccessKeyService", "Delete", iam2.DeleteAccessKeyRequest, self.key_delete, True),
            h("nebius.vpc.v1.NetworkService", "List", vpc.ListNetworksRequest, self.network_list),
            h("nebius.vpc.v1.NetworkService", "Get", vpc.GetNetworkRequest, self.network_get),
            h("nebius.vpc.v1.NetworkService", "Create", vpc.CreateNetworkRequest, self.network_create, True),
            h("nebius.vpc.v1.NetworkService", "Delete", vpc.DeleteNetworkRequest, self.network_delete, True),
            h(
                "nebius.vpc.v1.SecurityGroupService",
                "List",
                vpc.ListSecurityGroupsRequest,
                self.security_group_list,
            ),
            h(
                "nebius.vpc.v1.SecurityGroupService",
                "Delete",
                vpc.DeleteSecurityGroupRequest,
                self.security_group_delete,
                True,
            ),
            h("nebius.vpc.v1.SubnetService", "List", vpc.ListSubnetsRequest, self.subnet_list),
            h("nebius.vpc.v1.SubnetService", "Get", vpc.GetSubnetRequest, self.subnet_get),
            h("nebius.vpc.v1.SubnetService", "Create", vpc.CreateSubnetRequest, self.subnet_create, True),
            h("nebius.vpc.v1.SubnetService", "Delete", vpc.DeleteSubnetRequest, self.subnet_delete, True),
            h(
                "nebius.quotas.v1.QuotaAllowanceService",
                "List",
                quotas.ListQuotaAllowancesRequest,
                self.quota_list,
            ),
            h(
                "nebius.capacity.v1.CapacityBlockGroupService",
                "List",
                capacity.ListCapacityBlockGroupsRequest,
                self.capacity_list,
            ),
            h(
                "nebius.capacity.v1.CapacityBlockGroupService",
                "Get",
                capacity.GetCapacityBlockGroupRequest,
                self.capacity_get,
            ),
            h("nebius.storage.v1.BucketService", "Get", storage.GetBucketRequest, self.bucket_get),
            h(
                "nebius.storage.v1.BucketService",
                "GetByName",
                storage.GetBucketByNameRequest,
                self.bucket_get_by_name,
            ),
            h(
                "nebius.storage.v1.BucketService",
                "Create",
                storage.CreateBucketRequest,
                self.bucket_create,
                True,
            ),
            h(
                "nebius.storage.v1.BucketService",
                "Delete",
                storage.DeleteBucketRequest,
                self.bucket_delete,
                True,
            ),
            h("nebius.mk8s.v1.ClusterService", "Get", mk8s.GetClusterRequest, self.cluster_get),
            h("nebius.mk8s.v1.ClusterService", "List", mk8s.ListClustersRequest, self.cluster_list),
            h(
                "nebius.mk8s.v1.ClusterService",
                "Delete",
                mk8s.DeleteClusterRequest,
                self.cluster_delete,
                True,
            ),
            h("nebius.mk8s.v1.NodeGroupService", "Get", mk8s.GetNodeGroupRequest, self.node_group_get),
            h("nebius.mk8s.v1.NodeGroupService", "List", mk8s.ListNodeGroupsRequest, self.node_group_list),
            h(
                "nebius.mk8s.v1.NodeGroupService",
                "Delete",
                mk8s.DeleteNodeGroupRequest,
                self.node_group_delete,
                True,
            ),
            h(
                "nebius.compute.v1.FilesystemService",
                "List",
                compute.ListFilesystemsRequest,
                self.filesystem_list,
            ),
            h(
                "nebius.compute.v1.GpuClusterService",
                "List",
                compute.ListGpuClustersRequest,
                self.gpu_cluster_list,
            ),
            h("nebius.compute.v1.InstanceService", "List", compute.ListInstancesRequest, self.instance_list),
            h(
                "nebius.compute.v1.InstanceService",
                "GetByName",
                common.GetByNameRequest,
                self.instance_get_by_name,
            ),
            h(
                "nebius.compute.v1.InstanceService",
                "Stop",
                compute.StopInstanceRequest,
                self.instance_stop,
                True,
            ),
            h(
                "nebius.compute.v1.InstanceService",
                "Start",
                compute.StartInstanceRequest,
                self.instance_start,
                True,
            ),
            h(
                "nebius.compute.v1.InstanceService",
                "Delete",
                compute.DeleteInstanceRequest,
                self.instance_delete,
                True,
            ),
            h(
                "nebius.compute.v1.NodeService",
                "SetUnhealthy",
                compute.NodeSetUnhealthyRequest,
                self.node_set_unhealthy,
            ),
            h("nebius.compute.v1.DiskService", "List", compute.ListDisksRequest, self.disk_list),
            h(
                "nebius.compute.v1.MaintenanceService",
                "ListActive",
                compute.ListMaintenanceEventsRequest,
                self.maintenance_list_active,
            ),
            h(
                "nebius.registry.v1.RegistryService",
                "List",
                registry.ListRegistriesRequest,
                self.registry_list,
            ),
            h("nebius.common.v1.OperationService", "Get", common.GetOperationRequest, self.operation_get),
        ]


def _discard(table: dict[str, Any], key: str) -> None:
    table.pop(key, None)


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


class _Dispatcher:
    """Wraps each handler with auth, faults, idempotency, the call log and error encoding."""

    def __init__(self, fake: FakeNebius, handler: Handler) -> None:
        self.fake, self.handler = fake, handler

    def __call__(self, request: Any, context: grpc.ServicerContext) -> Any:
        fake, name = self.fake, self.handler.full_name
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        call = Call(name, request, metadata, peer=context.peer(), at=time.time())
        with fake.lock:
            fake.calls.append(call)
        if fake.latency_s:
            time.sleep(fake.latency_s)
        try:
            with fake.lock:
                return self._serve(request, metadata, call)
        except FakeError as err:
            call.code = err.code.name
            if err.details:
                status = rpc_status(err.code, err.message, err.details)
                context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(err.code, err.message)

    def _serve(self, request: Any, metadata: dict[str, str], call: Call) -> Any:
        fake, handler = self.fake, self.handler
        token = self._authenticate(metadata)
        fault = fake.take_fault(handler.full_name, after_effect=False)
        if fault is not None:
            raise FakeError(fault.code, fault.message)
        key = metadata.get(IDEMPOTENCY_HEADER, "")
        if handler.mutation:
            if not key:
                raise FakeError(grpc.StatusCode.INVALID_ARGUMENT, f"{IDEMPOTENCY_HEADER} header is required")
            cached = fake.idempotency.get((handler.full_name, key))
            if cached is not None:
                call.replayed = True
                return copy(cached)
        response = handler.fn(request, token)
        if handler.mutation:
            fake.idempotency[(handler.full_name, key)] = copy(response)
        fault = fake.take_fault(handler.full_name, after_effect=True)
        if fault is not None:
            raise FakeError(fault.code, fault.message)
        return response

    def _authenticate(self, metadata: dict[str, str]) -> TokenInfo:
        if self.handler.full_name in PUBLIC_METHODS:
            return TokenInfo("anonymous", set())
        header = metadata.get("authorization", "")
        if not header.startswith("Bearer "):
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "authorization: Bearer <token> is required")
        token = self.fake.tokens.get(header[len("Bearer ") :])
        if token is None:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "the token is not valid")
        if token.expires_at is not None and time.time() >= token.expires_at:
            raise FakeError(grpc.StatusCode.UNAUTHENTICATED, "the token has expired")
        return token


def build_server(
    fake: FakeNebius, *, credentials: grpc.ServerCredentials | None = None
) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    by_service: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
    for handler in WireServicers(fake).handlers():
        by_service.setdefault(handler.service, {})[handler.method] = grpc.unary_unary_rpc_method_handler(
            _Dispatcher(fake, handler),
            request_deserializer=handler.request_class.FromString,
            response_serializer=_serialize,
        )
    server.add_generic_rpc_handlers(
        tuple(
            grpc.method_handlers_generic_handler(service, methods) for service, methods in by_service.items()
        )
    )
    address = "127.0.0.1:0"
    port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    return server, port


@contextmanager
def serving(fake: FakeNebius, *, credentials: grpc.ServerCredentials | None = None) -> Iterator[str]:
    """Run the fake on a free loopback port; yields `127.0.0.1:<port>`."""
    server, port = build_server(fake, credentials=credentials)
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)
