"""Quota allowances and capacity block groups: what the tenant's fixture granted, with what is in use now
(accounting.py counts the use)."""

from __future__ import annotations

from typing import Any

from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator.store import Store


class Quotas:
    """The tenant's quota allowances and capacity block groups over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def list_quota_allowances(self, tenant_id: str) -> list[dict[str, Any]]:
        """Every allowance record, of every scope; choosing among them is the preflight's job."""
        with self.store.op("list_quota_allowances", {"tenant_id": tenant_id}, write=False) as ctx:
            ctx.check_tenant(tenant_id)
            rows = ctx.conn.execute("SELECT * FROM quotas ORDER BY position").fetchall()
            return [acct.quota_record(ctx.conn, row, ctx.tenant_id) for row in rows]

    def list_capacity_block_groups(self, tenant_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_capacity_block_groups", {"tenant_id": tenant_id}, write=False) as ctx:
            ctx.check_tenant(tenant_id)
            rows = ctx.conn.execute(
                "SELECT * FROM capacity_blocks WHERE parent_id = ? ORDER BY position", (tenant_id,)
            ).fetchall()
            return [acct.capacity_block_record(ctx.conn, row) for row in rows]

    def get_capacity_block_group(self, block_id: str) -> dict[str, Any]:
        with self.store.op("get_capacity_block_group", {"block_id": block_id}, write=False) as ctx:
            return acct.capacity_block_record(ctx.conn, ctx.block_row(block_id))
