"""The per-cluster overhead (issues 10 and 56): a one-cluster lifecycle through the default recipe (upstream
k8s-training with the fleet's override files, on the local cloud's providers) against raw terraform of the
same module. The `overhead` scenario (benchmarks/scenarios.py) runs it.

`npa-pulumi up` + `destroy` of a one-cluster CPU-only fleet, against `terraform init` + `apply` + `destroy`
of the very work dir the bridge laid out for that cluster (upstream + override files + the tfvars it wrote,
copied from the stack's work dir before its destroy), with the same providers (the CLI configuration the
bridge writes for the local cloud), the same plugin cache and the identity as `TF_VAR_*`, as the bridge
passes it. Interleaved (npa, raw, npa, raw, ...) on one local cloud. Each npa command's processes are
sampled by kind (benchmarks/process_costs.py), so the same runs give the product's first-deploy CPU per
cluster stack against its floor (the engine runs Pulumi needs, terraform's own CPU, one interpreter start per
Python process a Pulumi program with dynamic providers needs), as `stack_floor` does. The cloud's work (the
local providers: their Go shims and Python workers) is left out of both the product's figure and the floor.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import process_costs
from benchmarks.fixtures import PROJECT, REGION, TENANT, fleet_spec
from benchmarks.harness import CLI, MIRROR_ENV, REPO, SHARED_MIRROR, Home, RunFailed, median, stats

if TYPE_CHECKING:
    from benchmarks.scenarios import Budget

# The kinds of process (process_costs.kind_of) that are the cloud's, not the product's: on Nebius they are
# the real providers and the API. The local cloud's providers, the Go shims
# (terraform-provider-<type>_v<version>) and their Python workers; and soperator's stand-in recipe's
# provisioners, the local cloud's API run by terraform's local-exec through a shell.
PROVIDER_KINDS_PREFIX = ("terraform-provider-", "python -m npa_pulumi.simulator.tfproviders")
CLOUD_KINDS = ("local-cloud api (provisioners)", "shell")
STACK = "solo.{project}.c0000"


def raw_terraform_env(
    base: Mapping[str, str],
    identity: Mapping[str, str],
    cli_config: Path,
    plugin_cache: Path,
    python: str,
) -> dict[str, str]:
    """The environment a user running terraform by hand on the bridge's work dir needs: the ambient one
    without other TF_* settings, the identity and token as TF_VAR_* (the token also as NEBIUS_IAM_TOKEN, as
    the bridge passes it), the local cloud's CLI configuration and the plugin cache."""
    env = {k: v for k, v in base.items() if not k.startswith("TF_")}
    env.update({"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1"})
    env.update({f"TF_VAR_{name}": value for name, value in identity.items()})
    if identity.get("iam_token"):
        env["NEBIUS_IAM_TOKEN"] = identity["iam_token"]
    env["TF_CLI_CONFIG_FILE"] = str(cli_config)
    env["TF_PLUGIN_CACHE_DIR"] = str(plugin_cache)
    env["NPA_PYTHON"] = python
    return env


def is_cloud_kind(kind: str) -> bool:
    """Whether a process kind is the cloud's (a local provider, a stand-in's provisioner), not the
    product's or terraform's."""
    return kind in CLOUD_KINDS or kind.startswith(PROVIDER_KINDS_PREFIX)


def product_cpu(breakdown: process_costs.Breakdown) -> float:
    """The whole tree's CPU less what the sampler saw of the cloud's own processes."""
    return breakdown.tree_cpu_s - sum(v for k, v in breakdown.cpu_s.items() if is_cloud_kind(k))


def _raw_dir(home: Home, stack: str, repeat: int) -> Path:
    """A copy of the bridge's work dir for the stack (recipe, override files, tfvars), without its
    Terraform state, providers or log: what the user's own checkout of the same module would hold."""
    source = home.npa_home / "work" / stack
    target = home.root / "raw" / f"run-{repeat}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        source,
        target,
        ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "terraform.tfstate*", "*.log"),
    )
    return target / "k8s-training"


def _terraform(directory: Path, env: dict[str, str], *args: str) -> process_costs.Breakdown:
    from npa_pulumi.runtime.toolchain import find_terraform

    measured = process_costs.run([str(find_terraform()), *args, "-no-color"], env, directory)
    if measured.code != 0:
        raise RunFailed(f"terraform {' '.join(args)} exited {measured.code} in {directory}")
    return measured


def upstream_lifecycle(work: Path, budget: Budget) -> dict[str, Any]:
    """One cluster's `up` + `destroy` through upstream k8s-training vs raw terraform of the same work dir,
    with the projection of the fixed cost at real provisioning times."""
    from benchmarks.scenarios import _floor_of, _interpreter_floor  # the floor stack_floor measures
    from npa_pulumi.bridge.local_providers import write_cli_config

    p = budget.overhead_provisioning_s
    home = Home.fresh(work / "upstream")
    mirror = home.env().get(MIRROR_ENV, "")
    if not (Path(mirror) / "k8s-training" / "main.tf").is_file():
        raise RunFailed(
            f"no upstream k8s-training at {mirror or SHARED_MIRROR} (set {MIRROR_ENV}; `make` sets it)"
        )
    home.npa("local-cloud", "init", "--force")
    home.npa("local-cloud", "set", "provisioning-seconds", f"{p:g}")
    spec = home.root / "fleet.yaml"
    spec.write_text(fleet_spec("solo", 1))
    stack = STACK.format(project=PROJECT)
    inventory = home.npa_json("local-cloud", "show", "--output", "json")
    subnet = next(s["id"] for s in inventory["subnets"] if s["project_id"] == PROJECT)
    identity = {
        "tenant_id": TENANT,
        "parent_id": PROJECT,
        "region": REGION,
        "subnet_id": subnet,
        "iam_token": f"npa-local-iam-token.{TENANT}",
    }
    raw_env = raw_terraform_env(
        home.env(),
        identity,
        write_cli_config(home.root / "terraform-cli"),
        home.root / "tf-plugins",
        str(REPO / ".venv" / "bin" / "python"),
    )
    (home.root / "tf-plugins").mkdir(exist_ok=True)
    interpreters = _interpreter_floor(home.env())
    runs: list[dict[str, Any]] = []
    for repeat in range(budget.repeats):
        run: dict[str, Any] = {}
        up = process_costs.run([*CLI, "up", "--yes", "--spec", str(spec)], home.env(), REPO)
        if up.code != 0:
            raise RunFailed(f"npa-pulumi up exited {up.code}")
        directory = _raw_dir(home, stack, repeat)  # before destroy retires the work dir
        down = process_costs.run([*CLI, "destroy", "--yes", "--spec", str(spec)], home.env(), REPO)
        if down.code != 0:
            raise RunFailed(f"npa-pulumi destroy exited {down.code}")
        init = _terraform(directory, raw_env, "init", "-input=false")
        apply = _terraform(directory, raw_env, "apply", "-auto-approve", "-input=false")
        destroy = _terraform(directory, raw_env, "destroy", "-auto-approve", "-input=false")
        for op, measured in (("up", up), ("destroy", down)):
            run[op] = {
                "wall_s": round(measured.wall_s, 2),
                "cpu_s": round(product_cpu(measured), 2),
                "floor_s": _floor_of(op, measured, interpreters),
                "cpu_s_by_kind": measured.cpu_s_costliest_first(),
                "processes_by_kind": measured.processes,
                "exact": measured.exact,
            }
        raw_cpu = {
            k: round(product_cpu(m), 2) for k, m in (("init", init), ("apply", apply), ("destroy", destroy))
        }
        run["raw"] = {
            "wall_s": {"init": init.wall_s, "apply": apply.wall_s, "destroy": destroy.wall_s},
            "cpu_s": raw_cpu,
            "cpu_s_by_kind_apply": apply.cpu_s_costliest_first(),
        }
        run["npa_wall_s"] = round(up.wall_s + down.wall_s, 2)
        run["raw_wall_s"] = round(init.wall_s + apply.wall_s + destroy.wall_s, 2)
        run["first_deploy_cpu_s"] = run["up"]["cpu_s"]
        run["first_deploy_floor_s"] = round(sum(run["up"]["floor_s"].values()), 2)
        runs.append(run)
    shutil.rmtree(home.root, ignore_errors=True)
    npa_total = [r["npa_wall_s"] for r in runs]
    raw_total = [r["raw_wall_s"] for r in runs]
    ratio = median(npa_total) / median(raw_total)
    fixed = median([n - r for n, r in zip(npa_total, raw_total, strict=True)])
    floor_ratio = median([r["first_deploy_cpu_s"] / r["first_deploy_floor_s"] for r in runs])
    # What the same fixed cost means at real provisioning times (a Nebius mk8s cluster plus its node
    # group take minutes each); a projection from the measured overhead, labelled as such.
    projected = {
        f"{minutes}min_per_object": round(
            (2 * minutes * 60 + fixed + median(raw_total)) / (2 * minutes * 60 + median(raw_total)), 3
        )
        for minutes in (1, 5, 10)
    }
    return {
        "name": "per-cluster overhead: one-cluster lifecycle on upstream k8s-training",
        "target": "npa-pulumi up + destroy <= 1.3x raw terraform init + apply + destroy of the same work dir",
        "provisioning_seconds": p,
        "interpreter_floor_s": interpreters,
        "runs": runs,
        "npa_wall_s": stats(npa_total),
        "raw_wall_s": stats(raw_total),
        "ratio": round(ratio, 3),
        "fixed_overhead_s": round(fixed, 2),
        "projected_ratio": projected,
        "npa_cpu_s_median": round(median([r["up"]["cpu_s"] + r["destroy"]["cpu_s"] for r in runs]), 2),
        "raw_cpu_s_median": round(median([sum(r["raw"]["cpu_s"].values()) for r in runs]), 2),
        "first_deploy_cpu_s": stats([r["first_deploy_cpu_s"] for r in runs]),
        "first_deploy_floor_s": stats([r["first_deploy_floor_s"] for r in runs]),
        "first_deploy_ratio_to_floor": round(floor_ratio, 3),
        "met": ratio <= 1.3,
    }
