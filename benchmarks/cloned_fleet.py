"""A large deployed fleet, built by copying a few really deployed cluster stacks (issue 31).

Deploying 1,000 clusters costs about 4 s of CPU per cluster stack on this machine (over an hour of the
two cores), so the fleet-wide scenario deploys for real every project stack and the first `DEPLOYED`
clusters of the first project (those are the ones `up` then changes), and clones the other clusters from
the first: for each it creates the cloud objects in the local cloud (cluster and node group: the
simulator's own create calls, as the recipe makes them) and writes its stack's files as the engine wrote
the template's (the checkpoint, the tags, the newest history entry, the workspace's stack settings and the
policy results of its last engine run), with the template's names and ids replaced by the clone's and the
fingerprint `up` records for the clone's plan (benchmarks/fingerprints.py). What `status`, an unchanged
`preview` and the unchanged-check of `up` read of a stack is then what a deployed stack of that name
would hold. The clones are never run by an engine: every measured command finds them unchanged.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.fixtures import PROJECT, REGION, TENANT, spec_header
from benchmarks.harness import REPO, Home, S3Endpoint
from npa_pulumi.engine.automation import PROJECT_NAME as PULUMI_PROJECT
from npa_pulumi.engine.fingerprint import FINGERPRINT_OUTPUT
from npa_pulumi.runtime.disk_cache import cache_key
from npa_pulumi.simulator.db import db_path

DEPLOYED = 5  # clusters of the first project deployed for real: the template, and the ones `up` changes


@dataclass
class ClonedFleet:
    spec: Path
    name: str
    per_project: int
    project_ids: list[str]  # the spec's projects, in order
    deployed: list[str]  # the names of the really deployed clusters, the template first
    deployed_nodes: int = 1  # their CPU node count in the spec

    def toggle(self) -> None:
        """Rewrite the spec with the deployed clusters' CPU node count changed (1 <-> 2): a change of
        those clusters only."""
        self.deployed_nodes = 3 - self.deployed_nodes
        self.spec.write_text(
            _spec_text(
                self.name,
                self.project_ids,
                self.per_project,
                dict.fromkeys(self.deployed, self.deployed_nodes),
            )
        )


def _spec_text(
    name: str, project_ids: list[str], per_project: int, nodes: dict[str, int] | None = None
) -> str:
    """One existing-project entry per id (the clones' projects are created by the fixture, so every
    project is named by id) of `per_project` CPU clusters each; the first cluster is the template.
    `nodes`: another CPU node count for the named clusters (a change of those clusters only)."""
    lines = spec_header(name)
    for index, project_id in enumerate(project_ids):
        lines.append(f"  - project_id: {project_id}")
        lines.append("    clusters:")
        for n in range(per_project):
            cluster = f"c{index * per_project + n:04d}"
            lines.append(f"      - name: {cluster}")
            if nodes and cluster in nodes:
                lines.append(
                    f"        cpu_nodes: {{count: {nodes[cluster]}, platform: cpu-d3, preset: 4vcpu-16gb}}"
                )
    return "\n".join(lines) + "\n"


def _state_dir(home: Home) -> Path:
    return home.npa_home / "state" / ".pulumi"


def _outputs(home: Home, stack: str) -> dict[str, object]:
    checkpoint = json.loads((_state_dir(home) / "stacks" / PULUMI_PROJECT / f"{stack}.json").read_text())
    root = next(
        r for r in checkpoint["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:pulumi:Stack"
    )
    return dict(root["outputs"])


def _rename(text: str, old: dict[str, str], new: dict[str, str]) -> str:
    for key in sorted(old, key=lambda k: -len(old[k])):  # the longest first: ids and names nest
        text = text.replace(old[key], new[key])
    return text


def fingerprints(home: Home, spec: Path) -> dict[str, str]:
    """Each stack's fingerprint as `up` computes it, under the home's environment."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.fingerprints", str(spec)],
        env=home.env(),
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out))


class _StackFiles:
    """One deployed stack's files, and writing them again under another stack's names."""

    def __init__(self, home: Home, stack: str) -> None:
        state = _state_dir(home)
        self.stacks = state / "stacks" / PULUMI_PROJECT
        self.history = state / "history" / PULUMI_PROJECT
        self.workspace = home.npa_home / "workspace"
        self.policy = home.npa_home / "policy-results"
        [entry] = [p for p in (self.history / stack).iterdir() if p.name.endswith(".history.json")]
        [policy] = list(self.policy.glob(f"{stack}.????????????.json"))  # one backend: its 12-hex key
        self.stamp = entry.name.removeprefix(f"{stack}-")
        self.backend_key = policy.name.removeprefix(f"{stack}.")
        self.text = {
            "checkpoint": (self.stacks / f"{stack}.json").read_text(),
            "tags": (self.stacks / f"{stack}.pulumi-tags").read_text(),
            "history": entry.read_text(),
            "settings": (self.workspace / f"Pulumi.{stack}.yaml").read_text(),
            "policy": policy.read_text(),
        }

    def write(self, stack: str, old: dict[str, str], new: dict[str, str], tags: dict[str, str]) -> None:
        def text(kind: str) -> str:
            return _rename(self.text[kind], old, new)

        (self.stacks / f"{stack}.json").write_text(text("checkpoint"))
        document = json.loads(self.text["tags"])
        document["tags"].update(tags)
        (self.stacks / f"{stack}.pulumi-tags").write_text(json.dumps(document))
        (self.history / stack).mkdir(parents=True, exist_ok=True)
        (self.history / stack / f"{stack}-{self.stamp}").write_text(text("history"))
        (self.workspace / f"Pulumi.{stack}.yaml").write_text(text("settings"))
        (self.policy / f"{stack}.{self.backend_key}").write_text(text("policy"))


def build(home: Home, fleet: str, projects: int, per_project: int) -> ClonedFleet:
    """The fleet of `projects` x `per_project` clusters: the first DEPLOYED clusters and their project stack
    deployed for real, and one other project's stack (the template of the other project stacks); every
    other stack cloned. The spec and the deployed."""
    from npa_pulumi.simulator.simulator import LocalSimulator

    sim = LocalSimulator(directory=home.npa_home / "local-cloud")
    spec = home.root / "fleet.yaml"
    project_keys = [PROJECT]  # a project named by id is keyed by it
    names: dict[str, tuple[str, str, str]] = {}  # project id -> (its name, network id, subnet id)
    for index in range(1, projects):  # existing projects, each with its network, as a tenant has them
        project = sim.create_project(TENANT, f"{fleet}-clone-p{index:03d}", REGION)
        network = sim.create_network(project["id"], "fleet-network")
        subnet = sim.create_subnet(project["id"], network["id"], "fleet-subnet")
        project_keys.append(project["id"])
        names[project["id"]] = (project["name"], network["id"], subnet["id"])
    spec.write_text(_spec_text(fleet, project_keys, per_project))
    deployed = [f"c{n:04d}" for n in range(DEPLOYED)]
    up = ["up", "--spec", str(spec), "--yes", "--no-preflight", "-j", "8", "--output", "json"]
    home.npa(*up, "--stage", "projects", "--only-projects", ",".join(project_keys[:2]))
    home.npa(*up, "--only-projects", PROJECT, "--only-clusters", ",".join(deployed))
    prints = fingerprints(home, spec)
    for stack in (f"{fleet}.{project_keys[1]}", f"{fleet}.{PROJECT}.{deployed[0]}") if projects > 1 else ():
        if _outputs(home, stack)[FINGERPRINT_OUTPUT] != prints[stack]:  # the fixture computes what up did
            raise RuntimeError(f"benchmarks.fingerprints disagrees with what up recorded for {stack}")
    _clone_projects(home, fleet, project_keys[1:], names, prints)
    _clone_clusters(home, sim, fleet, project_keys, per_project, deployed, prints)
    return ClonedFleet(spec, fleet, per_project, project_keys, deployed)


def _clone_projects(
    home: Home,
    fleet: str,
    keys: list[str],
    names: dict[str, tuple[str, str, str]],
    prints: dict[str, str],
) -> None:
    """Every project stack after the first of `keys` (the template, deployed), as the engine would have
    written it for that project."""
    if len(keys) < 2:
        return

    def identity(key: str) -> dict[str, str]:
        name, network, subnet = names[key]
        stack = f"{fleet}.{key}"
        return {"stack": stack, "project": key, "name": name, "network": network, "subnet": subnet} | {
            "fingerprint": prints[stack]
        }

    template = keys[0]
    files = _StackFiles(home, f"{fleet}.{template}")
    old = identity(template)
    for key in keys[1:]:
        files.write(f"{fleet}.{key}", old, identity(key), {"npa:project": key})


def _clone_clusters(
    home: Home,
    sim: Any,
    fleet: str,
    project_keys: list[str],
    per_project: int,
    deployed: list[str],
    prints: dict[str, str],
) -> None:
    """Every cluster stack but the deployed, cloned from the first deployed one, with its cloud objects."""
    template = f"{fleet}.{PROJECT}.{deployed[0]}"
    outputs = _outputs(home, template)
    files = _StackFiles(home, template)
    group_ids: list[str] = outputs["node_group_ids"]  # type: ignore[assignment]
    old = _names(
        fleet, PROJECT, deployed[0], outputs, str(outputs["cluster_id"]), group_ids[0], prints[template]
    )
    clones = [
        (key, f"c{index * per_project + n:04d}")
        for index, key in enumerate(project_keys)
        for n in range(per_project)
    ]
    projects = {key: _outputs(home, f"{fleet}.{key}") for key in project_keys}
    # One connection held open throughout: each simulator call opens and closes its own, and the last one
    # closed checkpoints the write-ahead log into the database (most of a clone's cost at 10,000).
    with contextlib.closing(sqlite3.connect(db_path(sim.directory))):
        for key, name in clones:
            if name in deployed:
                continue
            project = projects[key]
            cluster = sim.create_cluster(str(project["project_id"]), name, str(project["subnet_id"]))
            group = sim.create_node_group(cluster["id"], "cpu", 1, "cpu-d3", "4vcpu-16gb")
            stack = f"{fleet}.{key}.{name}"
            new = _names(fleet, key, name, project, cluster["id"], group["id"], prints[stack])
            files.write(stack, old, new, {"npa:cluster": name, "npa:project": key})


def _names(
    fleet: str, key: str, name: str, ids: dict[str, object], cluster: str, group: str, fingerprint: str
) -> dict[str, str]:
    """What of a cluster stack's files names it: its stack, kube context and URN names, its project's
    and subnet's ids (from `ids`: its outputs, or its project stack's), its cluster's and node group's ids,
    and the fingerprint of its plan."""
    return {
        "stack": f"{fleet}.{key}.{name}",
        "context": f"fleet-{fleet}-{key}-{name}",
        "urn_name": f"::{name}",
        "project": str(ids["project_id"]),
        "subnet": str(ids["subnet_id"]),
        "cluster": cluster,
        "group": group,
        "fingerprint": fingerprint,
    }


def upload_state(home: Home, server: S3Endpoint) -> str:
    """A bucket on `server` (made by `backend init`, as a user makes one) holding the fleet's state, every
    file as the file backend holds it; the s3:// backend URL that reads it."""
    import boto3  # type: ignore[import-untyped]

    backend = server.backend(home, "bench-fleet")
    url = urlsplit(backend)
    prefix = url.path.strip("/")
    client = boto3.client("s3", endpoint_url=server.endpoint, **_credentials(server))
    state = _state_dir(home)

    def put(path: Path) -> None:
        key = "/".join(filter(None, [prefix, ".pulumi", str(path.relative_to(state))]))
        client.put_object(Bucket=url.netloc, Key=key, Body=path.read_bytes())

    files = sorted(p for p in state.rglob("*") if p.is_file() and "locks" not in p.parts)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:  # 40,000 objects at 10,000 stacks
        list(pool.map(put, files))
    # The policy results of each stack's last engine run, as this machine keeps them per backend: as if the
    # fleet had been deployed to the bucket from here, so an unchanged preview skips the engine there too.
    key = cache_key(backend)[:12]
    for path in (home.npa_home / "policy-results").glob("*.json"):
        stack_and_key = path.name.removesuffix(".json")
        (path.parent / f"{stack_and_key[:-12]}{key}.json").write_bytes(path.read_bytes())
    return backend


def _credentials(server: S3Endpoint) -> dict[str, str]:
    return {
        "aws_access_key_id": server.env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": server.env["AWS_SECRET_ACCESS_KEY"],
        "region_name": server.env["AWS_REGION"],
    }
