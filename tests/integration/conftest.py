"""Fixtures shared by integration tests (their helpers live in modules of this directory)."""

from s3_support import s3_backend, s3_server
from webhook_support import webhook

__all__ = ["s3_backend", "s3_server", "webhook"]
