"""The tenant fixture: the YAML a local cloud is seeded from, validated with pydantic.

```yaml
tenant_id: tenant-local
regions: [us-central1, eu-north1]
settings: {provisioning_seconds: 0, wait_timeout_seconds: 30}
quotas:                       # allowances; omit limit for unlimited
  - {name: compute.instance.count, region: us-central1, limit: 100, usage: 0, unit: count}
  - {name: vpc.network.count, region: us-central1, limit: 5, scope: project, parent_id: project-existing1}
capacity_block_groups:
  - {id: capacityblockgroup-local1, region: us-central1, platform: gpu-rtx6000, limit: 8, usage: 0}
projects:
  - {id: project-existing1, name: existing, region: us-central1}
```

Usage given in the fixture is a baseline (what other, unseen workloads consume); the simulator adds what
it creates on top. A record that gives `usage_percentage` but no `usage` keeps reporting no usage, and an
explicit `usage: null` reports none at all, so every allowance-selection rule can be exercised.

This module imports pydantic and ruamel.yaml, so the light machine-facing API only imports it when it
must seed a database.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from npa_pulumi.errors import UserInputError
from npa_pulumi.simulator import db, ids

DEFAULT_WAIT_TIMEOUT_S = 30.0


class FixtureError(UserInputError):
    kind = "invalid-tenant-fixture"


def _strip_prefix(value: str, prefix: str) -> str:
    value = (value or "").strip().upper()
    return value[len(prefix) :] if value.startswith(prefix) else value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QuotaSpec(_Model):
    id: str = ""
    name: str = Field(min_length=1)
    region: str = Field(min_length=1)
    limit: int | None = Field(default=None, ge=0)
    usage: int | None = Field(default=0, ge=0)
    usage_percentage: float | None = Field(default=None, ge=0)
    usage_state: str = ""
    unit: str = "count"
    state: str = "ACTIVE"
    scope: Literal["tenant", "project", "unscoped"] = "tenant"
    parent_id: str = ""
    container_id: str = ""

    @field_validator("state")
    @classmethod
    def _state(cls, value: str) -> str:
        return _strip_prefix(value, "STATE_")

    @field_validator("usage_state")
    @classmethod
    def _usage_state(cls, value: str) -> str:
        return _strip_prefix(value, "USAGE_STATE_")

    @model_validator(mode="after")
    def _scope(self) -> QuotaSpec:
        if self.scope == "project" and not self.parent_id.startswith("project-"):
            raise ValueError("a project-scoped quota needs parent_id: project-…")
        if self.scope == "unscoped" and self.parent_id:
            raise ValueError("an unscoped quota has no parent_id")
        return self

    def baseline_usage(self) -> int | None:
        """usage: 0 by default; none when the record only gives a percentage or says `usage: null`."""
        if "usage" in self.model_fields_set:
            return self.usage
        return None if self.usage_percentage is not None else 0


class CapacityBlockSpec(_Model):
    id: str
    region: str
    platform: str
    fabric: str = ""
    limit: int = Field(ge=0)
    usage: int | None = Field(default=0, ge=0)
    usage_percentage: float | None = Field(default=None, ge=0)
    usage_state: str = ""
    state: str = "ACTIVE"
    parent_id: str = ""  # the owning tenant; the fixture's tenant when empty

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not value.startswith(f"{ids.CAPACITY_BLOCK_GROUP}-"):
            raise ValueError("a capacity block group id starts with capacityblockgroup-")
        return value

    @field_validator("state")
    @classmethod
    def _state(cls, value: str) -> str:
        return _strip_prefix(value, "STATE_")

    @field_validator("usage_state")
    @classmethod
    def _usage_state(cls, value: str) -> str:
        return _strip_prefix(value, "USAGE_STATE_")

    def baseline_usage(self) -> int | None:
        if "usage" in self.model_fields_set:
            return self.usage
        return None if self.usage_percentage is not None else 0


class SubnetSpec(_Model):
    id: str = ""
    name: str
    cidr: str = ""


class NetworkSpec(_Model):
    id: str = ""
    name: str
    subnets: list[SubnetSpec] = Field(default_factory=list)


class ProjectSpec(_Model):
    id: str
    name: str
    region: str
    tenant_id: str = ""  # another tenant's project, for cross-tenant PermissionDenied tests
    labels: dict[str, str] = Field(default_factory=dict)
    networks: list[NetworkSpec] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not value.startswith(f"{ids.PROJECT}-"):
            raise ValueError("a project id starts with project-")
        return value


class Settings(_Model):
    provisioning_seconds: float = Field(default=0.0, ge=0)
    wait_timeout_seconds: float = Field(default=DEFAULT_WAIT_TIMEOUT_S, gt=0)


class TenantFixture(_Model):
    tenant_id: str = Field(min_length=1)
    regions: list[str] = Field(min_length=1)
    settings: Settings = Field(default_factory=Settings)
    quotas: list[QuotaSpec] = Field(default_factory=list)
    capacity_block_groups: list[CapacityBlockSpec] = Field(default_factory=list)
    projects: list[ProjectSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> TenantFixture:
        regions = set(self.regions)
        placed: list[tuple[str, list[str]]] = [
            ("quotas", [q.region for q in self.quotas]),
            ("capacity_block_groups", [b.region for b in self.capacity_block_groups]),
            ("projects", [p.region for p in self.projects]),
        ]
        for kind, item_regions in placed:
            for index, region in enumerate(item_regions):
                if region not in regions:
                    raise ValueError(f"{kind}[{index}].region {region!r} is not one of {self.regions}")
        project_ids = [p.id for p in self.projects]
        if len(set(project_ids)) != len(project_ids):
            raise ValueError("duplicate project ids")
        return self


def default_fixture_path() -> Path:
    return Path(str(resources.files("npa_pulumi") / "data" / "local-tenant.yaml"))


def load_fixture(path: Path) -> tuple[TenantFixture, str]:
    """Parse and validate a fixture file; return it with the sha256 of its bytes."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        raw = path.read_bytes()
    except OSError as err:
        raise FixtureError(f"cannot read tenant fixture {path}: {err.strerror}") from None
    try:
        document = YAML(typ="safe").load(raw)
    except YAMLError as err:
        raise FixtureError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(document, dict):
        raise FixtureError(f"{path}: a tenant fixture is a mapping with tenant_id, regions, quotas, …")
    try:
        fixture = TenantFixture.model_validate(document)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in err.errors()
        )
        raise FixtureError(f"{path}: {problems}") from None
    return fixture, hashlib.sha256(raw).hexdigest()


def seed(conn: sqlite3.Connection, fixture: TenantFixture, source: str, digest: str) -> None:
    """Fill an empty database from the fixture (inside the caller's write transaction)."""
    now = time.time()
    tenant = fixture.tenant_id
    for key, value in (
        ("schema_version", db.SCHEMA_VERSION),
        ("tenant_id", tenant),
        ("regions", json.dumps(fixture.regions)),
        ("fixture_source", source),
        ("fixture_sha256", digest),
        ("provisioning_seconds", repr(fixture.settings.provisioning_seconds)),
        ("wait_timeout_seconds", repr(fixture.settings.wait_timeout_seconds)),
    ):
        db.set_meta(conn, key, value)
    for quota in fixture.quotas:
        _seed_quota(conn, quota, tenant)
    for block in fixture.capacity_block_groups:
        _insert(
            conn,
            "capacity_blocks",
            {
                "id": block.id,
                "parent_id": block.parent_id or tenant,
                "region": block.region,
                "platform": block.platform,
                "fabric": block.fabric,
                "state": block.state,
                "lim": block.limit,
                "base_usage": block.baseline_usage(),
                "base_usage_pct": block.usage_percentage,
                "usage_state": block.usage_state,
            },
        )
    for project in fixture.projects:
        _seed_project(conn, project, tenant, now)
    db.set_meta(conn, "initialised_at", repr(now))


def _insert(conn: sqlite3.Connection, table: str, values: dict[str, Any]) -> None:
    columns, marks = ", ".join(values), ", ".join("?" * len(values))
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(values.values()))


def _seed_quota(conn: sqlite3.Connection, quota: QuotaSpec, tenant: str) -> None:
    parent = {"tenant": tenant, "project": quota.parent_id, "unscoped": ""}[quota.scope]
    derived_id = ids.keyed_id(ids.QUOTA_ALLOWANCE, f"{quota.scope}/{parent}/{quota.region}/{quota.name}")
    _insert(
        conn,
        "quotas",
        {
            "id": quota.id or derived_id,
            "name": quota.name,
            "region": quota.region,
            "lim": quota.limit,
            "base_usage": quota.baseline_usage(),
            "base_usage_pct": quota.usage_percentage,
            "usage_state": quota.usage_state,
            "unit": quota.unit,
            "state": quota.state,
            "scope": quota.scope,
            "parent_id": parent,
            "container_id": quota.container_id,
        },
    )


def _seed_resource(
    conn: sqlite3.Connection,
    now: float,
    *,
    kind: str,
    rid: str,
    owner: str,
    project_id: str,
    parent_id: str,
    name: str,
    region: str,
    data: dict[str, Any],
) -> None:
    """A pre-existing object. It has no allocations: the fixture's usage figures already count it."""
    _insert(
        conn,
        "resources",
        {
            "id": rid,
            "kind": kind,
            "tenant_id": owner,
            "project_id": project_id,
            "parent_id": parent_id,
            "name": name,
            "name_scope": owner if kind == "project" else project_id,
            "region": region,
            "created_at": now,
            "ready_at": now,
            "data": json.dumps({**data, "seeded": True}),
        },
    )


def _seed_project(conn: sqlite3.Connection, project: ProjectSpec, tenant: str, now: float) -> None:
    owner = project.tenant_id or tenant
    common = {"owner": owner, "project_id": project.id, "region": project.region}
    _seed_resource(
        conn, now, kind="project", rid=project.id, parent_id=owner, name=project.name,
        data={"labels": project.labels}, **common,
    )  # fmt: skip
    for network in project.networks:
        network_id = network.id or ids.keyed_id(ids.NETWORK, f"seed/{project.id}/{network.name}")
        _seed_resource(
            conn, now, kind="network", rid=network_id, parent_id=project.id, name=network.name,
            data={"labels": {}}, **common,
        )  # fmt: skip
        for subnet in network.subnets:
            subnet_id = subnet.id or ids.keyed_id(ids.SUBNET, f"seed/{project.id}/{subnet.name}")
            _seed_resource(
                conn, now, kind="subnet", rid=subnet_id, parent_id=network_id, name=subnet.name,
                data={"labels": {}, "cidr": subnet.cidr, "network_id": network_id}, **common,
            )  # fmt: skip
