"""A large deployed fleet, built by copying one really deployed cluster stack (issue 31).

Deploying 1,000 clusters costs about 4 s of CPU per cluster stack on this machine (over an hour of the
two cores), so the fleet-wide read scenario deploys one cluster for real and then, for each of the
others, creates its cloud objects in the local cloud (project, network, subnet, cluster, node group:
the simulator's own create calls, as the recipe makes them) and writes its stack's files as the engine
wrote the template's: the checkpoint, the tags and the newest history entry, with the template's names
and ids replaced by the clone's. What `status` reads of a stack (its record and the live cloud) is then
what a deployed stack of that name would hold. The clones are never updated by an engine: `up` and
`preview` of them are not measured from this fixture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.fixtures import PROJECT, REGION, TENANT, spec_header
from benchmarks.harness import Home
from npa_pulumi.engine.automation.workspace import PROJECT_NAME as PULUMI_PROJECT


@dataclass(frozen=True)
class Template:
    """The really deployed cluster stack the clones copy, and the ids it recorded."""

    stack: str
    cluster: str
    project_key: str
    outputs: dict[str, object]


def clone_spec(name: str, projects: int, per_project: int) -> str:
    """`projects` existing-project entries (the clones' projects are created by the fixture, so every
    project is named by id) of `per_project` CPU clusters each; the first cluster is the template."""
    lines = spec_header(name)
    for index in range(projects):
        lines.append(f"  - project_id: {PROJECT if index == 0 else f'{{p{index:03d}}}'}")
        lines.append("    clusters:")
        lines += [f"      - name: c{index * per_project + n:04d}" for n in range(per_project)]
    return "\n".join(lines) + "\n"


def _state_dir(home: Home) -> Path:
    return home.npa_home / "state" / ".pulumi"


def _template(home: Home, fleet: str) -> Template:
    stack = f"{fleet}.{PROJECT}.c0000"
    checkpoint = json.loads((_state_dir(home) / "stacks" / PULUMI_PROJECT / f"{stack}.json").read_text())
    root = next(
        r for r in checkpoint["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:pulumi:Stack"
    )
    return Template(stack, "c0000", PROJECT, dict(root["outputs"]))


def _rename(text: str, old: dict[str, str], new: dict[str, str]) -> str:
    for key in sorted(old, key=lambda k: -len(old[k])):  # the longest first: ids and names nest
        text = text.replace(old[key], new[key])
    return text


def build(home: Home, fleet: str, projects: int, per_project: int) -> Path:
    """Deploy the template cluster, then clone it to `projects` x `per_project` clusters; the spec."""
    from npa_pulumi.simulator.simulator import LocalSimulator

    spec = home.root / "fleet.yaml"
    template_spec = home.root / "template.yaml"
    template_spec.write_text(clone_spec(fleet, 1, 1))
    home.npa("up", "--spec", str(template_spec), "--yes", "--no-preflight", "--output", "json")
    template = _template(home, fleet)
    sim = LocalSimulator(directory=home.npa_home / "local-cloud")
    state = _state_dir(home)
    stacks = state / "stacks" / PULUMI_PROJECT
    history = state / "history" / PULUMI_PROJECT
    # The template was deployed once: one update, one history entry.
    [entry] = [p for p in (history / template.stack).iterdir() if p.name.endswith(".history.json")]
    old = {
        "stack": template.stack,
        "context": f"fleet-{fleet}-{PROJECT}-c0000",
        "urn_name": "::c0000",
        "project": str(template.outputs["project_id"]),
        "subnet": str(template.outputs["subnet_id"]),
        "cluster": str(template.outputs["cluster_id"]),
        "group": str(template.outputs["node_group_ids"][0]),  # type: ignore[index]
    }
    text = {
        "checkpoint": (stacks / f"{template.stack}.json").read_text(),
        "tags": (stacks / f"{template.stack}.pulumi-tags").read_text(),
        "history": entry.read_text(),
    }
    project_ids = [str(template.outputs["project_id"])]
    subnets = [str(template.outputs["subnet_id"])]
    for index in range(1, projects):
        project = sim.create_project(TENANT, f"{fleet}-clone-p{index:03d}", REGION)
        network = sim.create_network(project["id"], "fleet-network")
        subnet = sim.create_subnet(project["id"], network["id"], "fleet-subnet")
        project_ids.append(project["id"])
        subnets.append(subnet["id"])
    for index in range(projects):
        for n in range(per_project):
            number = index * per_project + n
            if number == 0:
                continue  # the template itself
            name = f"c{number:04d}"
            key = PROJECT if index == 0 else project_ids[index]
            cluster = sim.create_cluster(project_ids[index], name, subnets[index])
            group = sim.create_node_group(cluster["id"], "cpu", 1, "cpu-d3", "4vcpu-16gb")
            stack = f"{fleet}.{key}.{name}"
            new = {
                "stack": stack,
                "context": f"fleet-{fleet}-{key}-{name}",
                "urn_name": f"::{name}",
                "project": project_ids[index],
                "subnet": subnets[index],
                "cluster": cluster["id"],
                "group": group["id"],
            }
            (stacks / f"{stack}.json").write_text(_rename(text["checkpoint"], old, new))
            tags = json.loads(text["tags"])
            tags["tags"].update({"npa:cluster": name, "npa:project": key})
            (stacks / f"{stack}.pulumi-tags").write_text(json.dumps(tags))
            (history / stack).mkdir(parents=True, exist_ok=True)
            stamp = entry.name.removeprefix(f"{template.stack}-")
            (history / stack / f"{stack}-{stamp}").write_text(text["history"])
    spec_text = clone_spec(fleet, projects, per_project)
    for index in range(1, projects):
        spec_text = spec_text.replace(f"{{p{index:03d}}}", project_ids[index])
    spec.write_text(spec_text)
    return spec
