"""`ObjectStorage`: the project's bucket with an exact binary capacity cap, its own service account and
access key (a Pulumi secret), and a write/read/delete probe that must pass before the storage counts as
ready. Everything here is retained when the fleet is destroyed: buckets hold durable artifacts."""

from __future__ import annotations

import pulumi
from npa_pulumi.components.cloud_resources import (
    STORAGE_SERVICE_ACCOUNT,
    AccessKey,
    Bucket,
    BucketProbe,
    ServiceAccount,
)

from npa_pulumi.plan.naming import derived_bucket_name


class ObjectStorage(pulumi.ComponentResource):
    bucket_id: pulumi.Output[str]
    bucket_name: pulumi.Output[str]
    access_key_id: pulumi.Output[str]
    secret_access_key: pulumi.Output[str]
    verified: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        *,
        cloud: str,
        profile: str,
        fleet: str,
        project_key: str,
        tenant_id: str,
        project_id: pulumi.Input[str],
        region: str,
        storage_class: str,
        size_gibibytes: int,
        bucket_name: str = "",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            "npa:fleet:ObjectStorage",
            name,
            {
                "fleet": fleet,
                "project_key": project_key,
                "storage_class": storage_class,
                "size_gibibytes": size_gibibytes,
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        common = {
            "cloud": cloud,
            "profile": profile,
            "fleet": fleet,
            "project_key": project_key,
            "project_id": project_id,
            "region": region,
        }
        resolved_name = pulumi.Output.from_input(project_id).apply(
            lambda pid: bucket_name or derived_bucket_name(tenant_id, pid, fleet)
        )
        bucket = Bucket(
            f"{name}-bucket",
            {
                **common,
                "bucket_name": resolved_name,
                "storage_class": storage_class,
                "size_gibibytes": size_gibibytes,
            },
            child,
        )
        account = ServiceAccount(f"{name}-sa", {**common, "account_name": STORAGE_SERVICE_ACCOUNT}, child)
        key = AccessKey(f"{name}-key", {**common, "service_account_id": account.service_account_id}, child)
        probe = BucketProbe(
            f"{name}-probe",
            {
                **common,
                "bucket_id": bucket.bucket_id,
                "service_account_id": account.service_account_id,
                "access_key_id": key.access_key_id,
                "aws_access_key_id": key.aws_access_key_id,
                "secret": key.secret,
            },
            child,
        )
        self.bucket_id = bucket.bucket_id
        self.bucket_name = resolved_name
        self.access_key_id = key.aws_access_key_id
        self.secret_access_key = pulumi.Output.secret(key.secret)
        self.verified = probe.verified
        self.register_outputs(
            {"bucket_id": self.bucket_id, "bucket_name": self.bucket_name, "verified": self.verified}
        )
