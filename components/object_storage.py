"""`ObjectStorage`: the project's bucket with an exact binary capacity cap, its own service account and
access key (a Pulumi secret), the account's grant on exactly that bucket (a project group holding one
access permit, `storage.object-editor`; never the editors group), and a write/read/delete probe with that
key, which must pass (proving the grant) before the storage counts as ready. Everything here is retained
when the fleet is destroyed: buckets hold durable artifacts.

`adopt` binds the bucket the original tool created and nothing else: minting an access key is a change in
the cloud, which an adoption never makes, so the storage identity, its grant and the probe come with the
first `up` after it (`has_identity` is False until then)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi import Input

from npa_pulumi.components.args import FleetResourceArgs, as_props
from npa_pulumi.components.cloud_resources import (
    STORAGE_SERVICE_ACCOUNT,
    AccessKey,
    AccessKeyArgs,
    Bucket,
    BucketArgs,
    BucketGrant,
    BucketGrantArgs,
    BucketProbe,
    BucketProbeArgs,
    ServiceAccount,
    ServiceAccountArgs,
    StorageArgs,
)
from npa_pulumi.plan.naming import derived_bucket_name


@dataclass(frozen=True, kw_only=True)
class ObjectStorageArgs(FleetResourceArgs):
    tenant_id: str
    project_id: Input[str]
    region: str
    storage_class: str  # standard | enhanced_throughput | intelligent
    size_gibibytes: int
    bucket_name: str = ""  # "" derives a private name from tenant, project and fleet
    # `adopt`: the existing bucket to bind (and whether the original created it); "": the usual create.
    adopt_bucket_id: str = ""
    adopt_created: bool = False


class ObjectStorage(pulumi.ComponentResource):
    bucket_id: pulumi.Output[str]
    bucket_name: pulumi.Output[str]
    bucket_created: pulumi.Output[bool]
    service_account_id: pulumi.Output[str]
    service_account_created: pulumi.Output[bool]
    key_id: pulumi.Output[str]
    access_key_id: pulumi.Output[str]
    secret_access_key: pulumi.Output[str]
    verified: pulumi.Output[bool]
    has_identity: bool

    def __init__(
        self, name: str, args: ObjectStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "npa:fleet:ObjectStorage",
            name,
            {
                "fleet": args.fleet,
                "project_key": args.project_key,
                "storage_class": args.storage_class,
                "size_gibibytes": args.size_gibibytes,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        project_id = args.project_id
        scope = StorageArgs(
            cloud=args.cloud,
            profile=args.profile,
            fleet=args.fleet,
            project_key=args.project_key,
            project_id=project_id,
            region=args.region,
        )
        resolved_name = pulumi.Output.from_input(project_id).apply(
            lambda pid: args.bucket_name or derived_bucket_name(args.tenant_id, pid, args.fleet)
        )
        bucket = Bucket(
            f"{name}-bucket",
            BucketArgs(
                **as_props(scope),
                bucket_name=resolved_name,
                storage_class=args.storage_class,
                size_gibibytes=args.size_gibibytes,
                adopt_bucket_id=args.adopt_bucket_id,
                adopt_created=args.adopt_created,
            ),
            child,
        )
        self.bucket_id = bucket.bucket_id
        self.bucket_name = resolved_name
        # Durable, non-secret proof of what this fleet created: a teardown deletes nothing without it.
        self.bucket_created = bucket.created
        self.has_identity = not args.adopt_bucket_id
        if self.has_identity:
            self._identity(name, scope, bucket, child)
        else:
            self.service_account_id = self.key_id = self.access_key_id = pulumi.Output.from_input("")
            self.secret_access_key = pulumi.Output.secret("")
            self.service_account_created = self.verified = pulumi.Output.from_input(False)
        self.register_outputs(
            {
                "bucket_id": self.bucket_id,
                "bucket_name": self.bucket_name,
                "bucket_created": self.bucket_created,
                "service_account_id": self.service_account_id,
                "service_account_created": self.service_account_created,
                "key_id": self.key_id,
                "access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key,
                "verified": self.verified,
            }
        )

    def _identity(self, name: str, scope: StorageArgs, bucket: Bucket, child: pulumi.ResourceOptions) -> None:
        """The fleet's own storage identity on the bucket: account, key, grant, and the probe proving them."""
        account = ServiceAccount(
            f"{name}-sa", ServiceAccountArgs(**as_props(scope), account_name=STORAGE_SERVICE_ACCOUNT), child
        )
        key = AccessKey(
            f"{name}-key",
            AccessKeyArgs(**as_props(scope), service_account_id=account.service_account_id),
            child,
        )
        grant = BucketGrant(
            f"{name}-grant",
            BucketGrantArgs(
                **as_props(scope), bucket_id=bucket.bucket_id, service_account_id=account.service_account_id
            ),
            child,
        )
        probe = BucketProbe(
            f"{name}-probe",
            BucketProbeArgs(
                **as_props(scope),
                bucket_id=bucket.bucket_id,
                service_account_id=account.service_account_id,
                access_key_id=key.access_key_id,
                aws_access_key_id=key.aws_access_key_id,
                secret=key.secret,
                grant_id=grant.grant_id,
            ),
            child,
        )
        self.service_account_id = account.service_account_id
        self.service_account_created = account.created
        self.key_id = key.access_key_id
        self.access_key_id = key.aws_access_key_id
        self.secret_access_key = pulumi.Output.secret(key.secret)
        self.verified = probe.verified
