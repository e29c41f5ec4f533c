"""IAM service accounts and their access keys (access_keys.py: how a key's secret is made and kept)."""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.errors import AlreadyExists, InvalidArgument
from npa_pulumi.simulator.access_keys import (
    SECRET_DERIVATION,
    access_key_secret,
    new_aws_access_key_id,
    sha256,
)
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import clean_labels


class ServiceAccounts:
    """Service accounts and access keys over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def find_service_account(self, project_id: str, name: str) -> dict[str, Any] | None:
        with self.store.op(
            "find_service_account", {"project_id": project_id, "name": name}, write=False
        ) as ctx:
            ctx.project_row(project_id)
            return ctx.find_named("service_account", project_id, name)

    def list_service_accounts(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_service_accounts", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("service_account", "project_id", project_id)

    def list_access_keys(self, service_account_id: str) -> list[dict[str, Any]]:
        """The account's keys (ids and public key ids only: a secret is never readable again)."""
        with self.store.op(
            "list_access_keys", {"service_account_id": service_account_id}, write=False
        ) as ctx:
            ctx.row("service_account", service_account_id)
            return ctx.list_of("access_key", "parent_id", service_account_id)

    def create_service_account(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {"project_id": project_id, "name": name, "labels": clean_labels(labels)}
        with self.store.op("create_service_account", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            return ctx.create(
                "service_account",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels)},
                params=params,
                charges=[],
            )

    def delete_service_account(self, service_account_id: str, timeout_s: float | None = None) -> None:
        params = {"service_account_id": service_account_id}
        with self.store.op("delete_service_account", params, write=True, timeout_s=timeout_s) as ctx:
            ctx.row("service_account", service_account_id)
            keys = ctx.conn.execute(
                "SELECT id FROM resources WHERE kind = 'access_key' AND parent_id = ?", (service_account_id,)
            ).fetchall()
            for key in keys:  # an account's keys go with it
                ctx.delete_row(key["id"])
            ctx.delete_row(service_account_id)
        _s3_sync(self.store)

    def create_access_key(
        self,
        project_id: str,
        service_account_id: str,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        expires_at: float | None = None,
    ) -> dict[str, Any]:
        """`{"key": <access key record>, "secret": <secret>}`; the secret is never readable again, so a
        replayed idempotency key is refused rather than answered without it. `expires_at` (seconds since the
        epoch): a temporary key, EXPIRED and refused by the S3 endpoint from then on."""
        params = {"project_id": project_id, "service_account_id": service_account_id}
        with self.store.op("create_access_key", params, write=True, timeout_s=timeout_s) as ctx:
            if ctx.replay("access_key", idempotency_key, params) is not None:
                raise AlreadyExists(
                    "an access key's secret is shown once; create a new key instead of replaying"
                )
            project = ctx.project_row(project_id)
            account = ctx.row("service_account", service_account_id)
            if account["project_id"] != project_id:
                raise InvalidArgument(f"service account {service_account_id} is not in project {project_id}")
            aws_id = new_aws_access_key_id()
            secret = access_key_secret(self.store.directory, aws_id)
            rid = ctx.insert(
                "access_key",
                name=aws_id,
                scope=project_id,
                project_id=project_id,
                parent_id=service_account_id,
                region=project["region"],
                key=idempotency_key,
                data={
                    "aws_access_key_id": aws_id,
                    "secret_sha256": sha256(secret),
                    "secret_derivation": SECRET_DERIVATION,
                    **({"expires_at": expires_at} if expires_at is not None else {}),
                },
                params=params,
            )
            minted = {"key": ctx.fetch("access_key", rid), "secret": secret}
        _s3_sync(self.store)
        return minted

    def delete_access_key(self, access_key_id: str, timeout_s: float | None = None) -> None:
        params = {"access_key_id": access_key_id}
        with self.store.op("delete_access_key", params, write=True, timeout_s=timeout_s) as ctx:
            ctx.row("access_key", access_key_id)
            ctx.delete_row(access_key_id)
        _s3_sync(self.store)


def _s3_sync(store: Store) -> None:
    """A SeaweedFS S3 server serving this cloud takes the change before the call returns (seaweed.py)."""
    from npa_pulumi.simulator import seaweed

    seaweed.sync_if_serving(store.directory)
