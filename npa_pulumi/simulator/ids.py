"""Nebius-style resource IDs: `<kind prefix>-e00<15 characters>`.

Two flavours:

* `new_id` draws the body at random, as the real API does;
* `keyed_id` derives it from a client-supplied idempotency key. Terraform resources cannot read a
  local-exec's stdout, so soperator's stand-in recipe computes the same ID in HCL
  (`"<prefix>-e00${substr(sha256("<prefix>/<key>"), 0, 15)}"`) from a stable key (owner, project, name
  and a digest of the request), so a repeated apply after a crash adopts what the first one created.
  That is the reason the local cloud accepts idempotency keys on every create.
"""

from __future__ import annotations

import hashlib
import secrets

ID_BODY_LENGTH = 15
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

PROJECT = "project"
NETWORK = "vpcnetwork"
SUBNET = "vpcsubnet"
CLUSTER = "mk8scluster"
NODE_GROUP = "mk8snodegroup"
FILESYSTEM = "computefilesystem"
GPU_CLUSTER = "computegpucluster"
BUCKET = "bucket"
SERVICE_ACCOUNT = "serviceaccount"
ACCESS_KEY = "accesskey"
INSTANCE = "computeinstance"
DISK = "computedisk"
REGISTRY = "registry"
IAM_GROUP = "group"
SECURITY_GROUP = "vpcsecuritygroup"
QUOTA_ALLOWANCE = "quotaallowance"
CAPACITY_BLOCK_GROUP = "capacityblockgroup"


def new_id(prefix: str) -> str:
    body = "".join(secrets.choice(_ALPHABET) for _ in range(ID_BODY_LENGTH))
    return f"{prefix}-e00{body}"


def keyed_id(prefix: str, key: str) -> str:
    """The ID a create with idempotency key `key` gets; the recipe's HCL computes the same string."""
    digest = hashlib.sha256(f"{prefix}/{key}".encode()).hexdigest()
    return f"{prefix}-e00{digest[:ID_BODY_LENGTH]}"


# The resources table's `kind` -> its ID prefix.
KIND_PREFIX: dict[str, str] = {
    "project": PROJECT,
    "network": NETWORK,
    "subnet": SUBNET,
    "cluster": CLUSTER,
    "node_group": NODE_GROUP,
    "filesystem": FILESYSTEM,
    "gpu_cluster": GPU_CLUSTER,
    "bucket": BUCKET,
    "service_account": SERVICE_ACCOUNT,
    "access_key": ACCESS_KEY,
    "instance": INSTANCE,
    "disk": DISK,
    "registry": REGISTRY,
    "iam_group": IAM_GROUP,
    "security_group": SECURITY_GROUP,
}
