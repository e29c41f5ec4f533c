"""Generated inputs: fleet specs of any size, and tenant fixtures with room for them (and with as many
quota records as a large tenant has)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from npa_pulumi.simulator.fixture import default_fixture_path

PROJECT = "project-existing1"
REGION = "us-central1"
TENANT = "tenant-local"


def spec_header(name: str) -> list[str]:
    """A generated spec's lines up to its `projects:` (one small CPU pool per cluster, no filestore)."""
    return [
        "apiVersion: npa.fleet/v0.0.1",
        f"name: {name}",
        f"region: {REGION}",
        "defaults:",
        "  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}",
        "  enable_filestore: false",
        "projects:",
    ]


def fleet_spec(name: str, clusters: int, projects: int = 1, existing_project: bool = True) -> str:
    """`clusters` CPU-only clusters spread over `projects` projects (the first one the fixture's existing
    project when `existing_project`, the others created by name)."""
    lines = spec_header(name)
    per_project = [clusters // projects + (1 if i < clusters % projects else 0) for i in range(projects)]
    number = 0
    for index, count in enumerate(per_project):
        if index == 0 and existing_project:
            lines.append(f"  - project_id: {PROJECT}")
        else:
            lines.append(f"  - name: {name}-p{index:03d}")
        lines.append("    clusters:")
        for _ in range(count):
            lines.append(f"      - name: c{number:04d}")
            number += 1
    return "\n".join(lines) + "\n"


def upgrade_fleet_spec(name: str, clusters: int, projects: int = 1) -> str:
    """`clusters` clusters on three Kubernetes minors (1.30, 1.31, 1.32 in turn), each with a CPU pool and an
    8-GPU H200 pool of 2 nodes (every fifth pinned), under a fleet-wide weekend window and a project-level
    exclusion on every other project: what `upgrade plan` walks at fleet scale (issue 58)."""
    lines = spec_header(name)
    lines[lines.index("projects:") : lines.index("projects:")] = [
        "  maintenance:",
        "    windows: [{days: [sat, sun], start: '02:00', duration: 4h, time_zone: Europe/Amsterdam}]",
    ]
    per_project = [clusters // projects + (1 if i < clusters % projects else 0) for i in range(projects)]
    number = 0
    for index, count in enumerate(per_project):
        lines.append(f"  - name: {name}-p{index:03d}")
        if index % 2:
            lines += [
                "    maintenance:",
                "      windows: [{days: [wed], start: '22:00', duration: 6h, time_zone: America/New_York}]",
                "      exclusions: [{scope: no-minor, end: '2027-01-15'}]",
            ]
        lines.append("    clusters:")
        for _ in range(count):
            pin = ", pin: true" if number % 5 == 0 else ""
            lines += [
                f"      - name: c{number:04d}",
                f"        k8s_version: '1.3{number % 3}'",
                "        infiniband_fabric: fabric-2",
                f"        gpu_nodes: {{count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb{pin}}}",
            ]
            number += 1
    return "\n".join(lines) + "\n"


def train_fleet_spec(name: str, clusters: int, projects: int = 1) -> str:
    """`clusters` clusters on three Kubernetes minors (1.30, 1.31, 1.32 in turn), each with its CPU pool and a
    one-GPU RTX pool, every fifth GPU pool pinned (no version: it holds where it runs), no windows: what
    `upgrade run` moves to 1.33 on the local cloud (issue 58)."""
    lines = spec_header(name)
    per_project = [clusters // projects + (1 if i < clusters % projects else 0) for i in range(projects)]
    number = 0
    for index, count in enumerate(per_project):
        lines += [f"  - name: {name}-p{index:03d}", "    clusters:"]
        for _ in range(count):
            pin = ", pin: true" if number % 5 == 0 else ""
            lines += [
                f"      - name: c{number:04d}",
                f"        k8s_version: '1.3{number % 3}'",
                f"        gpu_nodes: {{count: 1, platform: gpu-rtx6000, preset: 1gpu-24vcpu-218gb{pin}}}",
            ]
            number += 1
    return "\n".join(lines) + "\n"


def _load(path: Path) -> dict[str, Any]:
    return dict(YAML(typ="safe").load(path.read_text()))


def roomy_tenant(path: Path, quota_records: int = 0, scale: int = 100) -> Path:
    """The default tenant with every limit multiplied by `scale` (room for a 1,000-cluster fleet), padded
    with project-scoped records of other projects up to `quota_records` records in all."""
    fixture = _load(default_fixture_path())
    quotas = []
    for quota in fixture["quotas"]:
        quota = dict(quota)
        if quota.get("limit") is not None:
            quota["limit"] = int(quota["limit"]) * scale
        quotas.append(quota)
    names = sorted({q["name"] for q in quotas})
    regions = list(fixture["regions"])
    padding = max(0, quota_records - len(quotas))
    for index in range(padding):
        quotas.append(
            {
                "name": names[index % len(names)],
                "region": regions[(index // len(names)) % len(regions)],
                "limit": 1000,
                "usage": index % 7,
                "scope": "project",
                "parent_id": f"project-e00bench{index // (len(names) * len(regions)):07d}",
            }
        )
    fixture["quotas"] = quotas
    yaml = YAML(typ="safe")
    yaml.default_flow_style = None
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        yaml.dump(fixture, handle)
    return path
