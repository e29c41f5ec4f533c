"""Fixtures shared by integration tests (their helpers live in modules of this directory)."""

from s3_support import keyed_s3, s3_backend, s3_server
from webhook_support import webhook

__all__ = ["keyed_s3", "s3_backend", "s3_server", "webhook"]
