"""Fixtures shared by integration tests (their helpers live in modules of this directory)."""

from s3_support import _seaweedfs, keyed_s3, kms_server, s3_backend, s3_server
from webhook_support import webhook

__all__ = ["_seaweedfs", "keyed_s3", "kms_server", "s3_backend", "s3_server", "webhook"]
