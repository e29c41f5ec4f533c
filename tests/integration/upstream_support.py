"""Upstream k8s-training run by real terraform against the local cloud, outside the engine: the work dir the
bridge materializes for one cluster of a spec (upstream k8s-training from ../shared, the fleet's override
files, the tfvars the product renders), a clean offline terraform whose providers are the local cloud's
(the toolchain's mirror). Shared by test_upstream_apply and test_disruption_agreement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_pulumi.bridge.local_providers import write_cli_config
from npa_pulumi.bridge.recipe import default_source, materialize
from npa_pulumi.plan import render_tfvars, resolve_targets
from npa_pulumi.plan.tfvars import RenderedTfvars
from npa_pulumi.runtime.toolchain import find_local_provider_mirror, find_terraform
from npa_pulumi.simulator import LocalSimulator
from npa_pulumi.spec.parse import parse_spec

TENANT = "tenant-local"
REGION = "us-central1"
PROJECT = "project-existing1"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHhR4pKoiEHzZnGfmfXOwhnxAdO9CJyu5y8cq9mE7yZb test@npa"


@dataclass
class Workspace:
    """One cluster's terraform work dir, as the bridge materialises it. `env` runs terraform as the bridge
    does (identity and token, the rendered runtime variables); `identity_env` is it without the runtime
    variables, for rendering another revision of the spec (`env_for`)."""

    directory: Path
    env: dict[str, str]
    identity_env: dict[str, str]
    recipe_variables: set[str]
    simulator: LocalSimulator

    def terraform(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # -no-color right after the subcommand: a flag after a positional argument (a plan file) is not one.
        result = subprocess.run(
            [str(find_terraform()), args[0], "-no-color", *args[1:]],
            cwd=self.directory,
            env=self.env if env is None else env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check:
            assert result.returncode == 0, f"terraform {args[0]} failed:\n{result.stdout}\n{result.stderr}"
        return result

    def apply(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.terraform("apply", "-auto-approve", "-input=false", check=check)

    def destroy(self) -> None:
        self.terraform("destroy", "-auto-approve", "-input=false")

    def env_for(self, rendered: RenderedTfvars) -> dict[str, str]:
        """The environment terraform runs in for `rendered`: identity, token, its runtime variables."""
        env = dict(self.identity_env)
        env.update(
            {
                f"TF_VAR_{k}": v if isinstance(v, str) else json.dumps(v)
                for k, v in rendered.runtime_vars.items()
            }
        )
        return env

    def state(self) -> dict[str, dict[str, Any]]:
        """Each resource instance of the state by address: its attributes."""
        shown = json.loads(self.terraform("show", "-json").stdout)
        found: dict[str, dict[str, Any]] = {}
        modules = [shown.get("values", {}).get("root_module", {})]
        while modules:
            module = modules.pop()
            found.update({r["address"]: r["values"] for r in module.get("resources", [])})
            modules.extend(module.get("child_modules", []))
        return found

    def inventory(self) -> dict[str, list[dict[str, Any]]]:
        return self.simulator.inventory()

    def usage(self, name: str) -> int:
        (quota,) = [
            q
            for q in self.inventory()["quotas"]
            if (q["name"], q["region"], q["scope"]) == (name, REGION, "tenant")
        ]
        return int(quota["usage"] or 0)

    def block_usage(self, block_id: str) -> int:
        (block,) = [b for b in self.inventory()["capacity_block_groups"] if b["id"] == block_id]
        return int(block["usage"] or 0)


def render(spec: str, cluster: str, recipe_variables: set[str]) -> RenderedTfvars:
    """The product's tfvars for `cluster` of the spec text: what the bridge writes for its stack."""
    (target,) = [t for t in resolve_targets(parse_spec(spec)) if t.cluster_name == cluster]
    return render_tfvars(target, recipe_variables, SSH_KEY)


class LocalTerraform:
    """Work dirs under `root` against one local cloud (`root/cloud`): a clean, offline terraform, no
    inherited TF_* setting, the local cloud's providers only, one plugin cache for every work dir (as the
    bridge shares one)."""

    def __init__(self, root: Path) -> None:
        mirror = find_local_provider_mirror()
        assert mirror is not None, "the local cloud's providers are not built: run `make tools`"
        self.root = root
        cloud_dir = root / "cloud"
        (root / "plugins").mkdir(parents=True, exist_ok=True)
        self.base = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "NEBIUS_"))}
        self.base.update(
            {
                "HOME": str(root / "home"),
                "TF_CLI_CONFIG_FILE": str(write_cli_config(root / "cli", mirror)),
                "TF_PLUGIN_CACHE_DIR": str(root / "plugins"),
                "TF_IN_AUTOMATION": "1",
                "CHECKPOINT_DISABLE": "1",
                "NPA_PYTHON": sys.executable,
                "NPA_LOCAL_CLOUD_DIR": str(cloud_dir),
                "NPA_LOCAL_CLOUD_KUBERNETES_API": "0",
                "NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S": "1.5",
            }
        )
        self.simulator = LocalSimulator(cloud_dir)

    def workspace(self, spec: str, cluster: str, copy: str = "") -> Workspace:
        """`cluster`'s work dir of the spec text, its tfvars written, `terraform init` run."""
        subnet = self.simulator.list_subnets(PROJECT)[0]["id"]
        work = self.root / f"{cluster}{copy}"
        recipe = materialize(default_source(), work, REGION, self.root / "cache")
        rendered = render(spec, cluster, recipe.variables)
        (recipe.module_dir / "terraform.tfvars.json").write_text(json.dumps(rendered.file_vars, indent=2))
        identity = {"tenant_id": TENANT, "parent_id": PROJECT, "region": REGION, "subnet_id": subnet}
        identity_env = dict(self.base)
        identity_env.update({f"TF_VAR_{k}": v for k, v in identity.items()})
        identity_env["TF_VAR_iam_token"] = f"npa-local-iam-token.{TENANT}"
        workspace = Workspace(
            recipe.module_dir, identity_env, identity_env, set(recipe.variables), self.simulator
        )
        workspace.env = workspace.env_for(rendered)
        workspace.terraform("init", "-input=false")
        return workspace
