"""`TerraformModule`: the Terraform bridge as a Pulumi dynamic resource.

One instance runs one recipe for one cluster stack. Its provider materializes the recipe into the stack's
work dir, writes `terraform.tfvars.json`, and runs terraform init/apply/output/destroy through
`npa_pulumi.bridge`. Identity (tenant, project, region, subnet) and the IAM token reach Terraform only as
`TF_VAR_*` at run time; the token is minted in the provider process and never enters Pulumi state.

The Terraform state is returned as the `tf_state` output (a Pulumi secret), so a fresh machine with the same
backend and passphrase can update or destroy the cluster; the work dir keeps the newest copy when an apply
fails half-way (see `TerraformWorkspace.restore_state`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi import Input
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult
from pydantic import BaseModel

from npa_pulumi.components.args import FleetResourceArgs, ProviderModel, as_props, with_outputs
from npa_pulumi.runtime.home import cache_dir, logs_dir, work_dir
from npa_pulumi.runtime.supervision import watch_run

if TYPE_CHECKING:
    from npa_pulumi.bridge.credentials import TerraformAuth
    from npa_pulumi.bridge.recipe import RecipeSource
    from npa_pulumi.bridge.terraform import TerraformWorkspace

# In the engine's provider host (where this module is unpickled), stop when the run that started the host
# is killed, instead of idling or running terraform forever (npa_pulumi/runtime/supervision.py). Else a
# no-op.
watch_run()

# Inputs whose change means Terraform has work to do (all applied in place; the recipe decides what is
# replaced inside the cluster). Drift a refresh found (`drift`) also does.
_APPLY_KEYS = ("tfvars", "runtime_tfvars", "recipe", "identity")


@dataclass(frozen=True, kw_only=True)
class TerraformModuleArgs(FleetResourceArgs):
    module_kind: str  # "k8s-training"
    cluster: str
    work_key: str  # the work dir under <npa home>/work/ (the cluster stack's name)
    identity: Mapping[str, Input[str]]  # tenant_id, parent_id, region, subnet_id: TF_VAR_* at run time
    identity_env: list[str]  # the TF_VAR_* names identity (and the IAM token) reach Terraform as
    tfvars: dict[str, Any]  # terraform.tfvars.json
    runtime_tfvars: Input[dict[str, Any]]  # TF_VAR_* at run time only (a Pulumi secret)
    recipe: dict[str, str]  # source, location, digest
    recipe_facts: dict[str, Any]  # what the recipe does with the shared filesystem (policies read it)
    # `adopt`: the Terraform state of a cluster another tool deployed (the original `npa fleet`), a Pulumi
    # secret. The create takes it over instead of applying: it is restored, Terraform's plan must be empty
    # (nothing in the cloud changes), and it becomes the bridge's own state. `recipe` is then the recipe
    # that made that state (engine/operations/adopt.py keeps a copy of the install's), so the plan proves
    # exactly that; the move to the spec's recipe is the next update's ordinary diff on `recipe`.
    adopted_state: Input[str] | None = None


class Identity(BaseModel):
    tenant_id: str
    parent_id: str
    region: str
    subnet_id: str


class RecipeRef(BaseModel):
    source: str
    location: str
    digest: str


class TerraformModuleInputs(ProviderModel):
    cloud: str
    profile: str = ""
    fleet: str
    project_key: str
    cluster: str
    work_key: str
    identity: Identity
    tfvars: dict[str, Any]
    runtime_tfvars: dict[str, Any] | None = None
    recipe: RecipeRef
    module_kind: str = "k8s-training"  # or "soperator" (npa_pulumi/bridge/soperator_recipe.py)
    adopted_state: str | None = None


class TerraformModuleOutputs(ProviderModel):
    outputs: dict[str, Any]
    sensitive_outputs: dict[str, Any]  # a Pulumi secret
    tf_state: str | None  # the Terraform state verbatim (a Pulumi secret)
    # What a refresh (`read`) found changed outside the fleet: [{address, kind, id, reason}]. Non-empty, it
    # makes the next diff report changes, and the update re-creates each address (npa_pulumi/bridge/drift.py).
    drift: list[dict[str, str]] = []


def _workspace(inputs: TerraformModuleInputs) -> TerraformWorkspace:
    from npa_pulumi.bridge.terraform import TerraformWorkspace

    if inputs.module_kind == "soperator":
        from npa_pulumi.bridge.soperator_recipe import INSTALLATION

        return TerraformWorkspace(root=work_dir(inputs.work_key), module_subdir=INSTALLATION)
    return TerraformWorkspace(root=work_dir(inputs.work_key))


def _auth(inputs: TerraformModuleInputs, source_kind: str) -> TerraformAuth:
    """Profile or token for this run (npa_pulumi/bridge/credentials.py); warns when a token-path run on
    Nebius may outlive its token."""
    from npa_pulumi.bridge.credentials import terraform_auth, token_life_warning
    from npa_pulumi.runtime import provider_env

    environ = provider_env.environ()
    auth = terraform_auth(inputs.cloud, source_kind, inputs.profile, environ)
    warning = token_life_warning(environ) if auth.mode == "token" and inputs.cloud == "nebius" else None
    if warning:
        pulumi.log.warn(warning)
    return auth


def _token(inputs: TerraformModuleInputs) -> str | None:
    """Mint the IAM token for this run, from the cloud adapter's own credentials."""
    from npa_pulumi.components._cloud import cloud_for

    identity = inputs.identity
    cloud = cloud_for(inputs.cloud, inputs.profile, identity.region, identity.tenant_id)
    mint = getattr(cloud, "access_token", None)
    token = mint() if callable(mint) else None
    if token is None:
        return None
    return str(token.get_secret_value() if hasattr(token, "get_secret_value") else token)


def _source(inputs: TerraformModuleInputs) -> RecipeSource:
    from npa_pulumi.bridge.recipe import RecipeSource, SourceKind

    kinds: tuple[SourceKind, ...] = ("local-stand-in", "dir", "git", "default")
    kind = next((k for k in kinds if k == inputs.recipe.source), None)
    if kind is None:
        raise RuntimeError(f"unknown recipe source {inputs.recipe.source!r}")
    location = inputs.recipe.location
    if kind == "local-stand-in" and inputs.module_kind == "soperator":
        from npa_pulumi.bridge import soperator_recipe

        # The shipped stand-in is found where this installation keeps it, not at the path recorded in
        # state (another machine, or a moved checkout, has it elsewhere).
        location = str(soperator_recipe.stand_in_dir())
    elif kind == "local-stand-in":
        # State written by a release that still shipped recipes/local-k8s-training: its terraform_data
        # resources cannot be planned or destroyed without that module.
        raise RuntimeError(
            "this cluster stack was deployed with the k8s-training stand-in recipe "
            "(recipes/local-k8s-training), which npa-pulumi no longer ships; --cloud local now deploys the "
            "default recipe. Destroy it with the npa-pulumi release that deployed it, or start afresh: "
            "`npa-pulumi local-cloud reset --yes` and a new backend (or this fleet's stacks removed from "
            "this one), then `up`"
        )
    return RecipeSource(kind, location)


def _prepare(
    props: dict[str, Any],
    old_state: str | dict[str, Any] | None,
    *,
    same_recipe: bool = True,
    workspace: TerraformWorkspace | None = None,
) -> tuple[TerraformWorkspace, dict[str, str]]:
    """Materialize the recipe, restore state, init. `same_recipe` (create/update) insists on the recipe
    the preview saw; destroy and refresh use the recipe as it is now. `workspace`: another work dir than the
    stack's (a preview's throw-away copy)."""
    from npa_pulumi.bridge.recipe import materialize
    from npa_pulumi.bridge.terraform import runtime_env

    inputs = TerraformModuleInputs.model_validate(props)
    soperator = inputs.module_kind == "soperator"
    if workspace is not None and soperator:  # a preview's scratch dir: the recipe's own layout
        from npa_pulumi.bridge.soperator_recipe import INSTALLATION

        workspace.module_subdir = INSTALLATION
    workspace = workspace or _workspace(inputs)
    source = _source(inputs)
    if soperator:
        from npa_pulumi.bridge import soperator_recipe

        recipe = soperator_recipe.materialize(source, workspace.root, inputs.identity.region, cache_dir())
    else:
        recipe = materialize(source, workspace.root, inputs.identity.region, cache_dir())
    if same_recipe and recipe.digest != inputs.recipe.digest:
        raise RuntimeError(
            f"the recipe at {source.location} changed between preview and apply (digest "
            f"{recipe.digest[:12]} != {inputs.recipe.digest[:12]}); run the command again"
        )
    workspace.write_tfvars(inputs.tfvars)
    workspace.restore_state(old_state)
    identity = inputs.identity.model_dump()
    auth = _auth(inputs, source.kind)
    token = _token(inputs) if auth.mode == "token" else None  # a profile run passes no token at all
    if token is not None:
        identity["iam_token"] = token
    if soperator:  # the soperator recipe names the fleet's identity its own way
        from npa_pulumi.bridge.soperator_recipe import recipe_identity

        identity = recipe_identity(identity)
    extra = {"NPA_PYTHON": sys.executable, **auth.env()}
    if source.kind == "local-stand-in":
        # The soperator stand-in derives stable idempotency keys from this owner (see its main.tf); other
        # recipes do not declare the variable, so it is only passed to the stand-in.
        extra["TF_VAR_npa_idempotency_scope"] = inputs.work_key
    from_local_mirror = inputs.cloud == "local" and source.kind != "local-stand-in"
    if from_local_mirror:
        # A real recipe on the local cloud: terraform installs its providers from the local cloud's
        # mirror (bridge/local_providers.py), never from a registry.
        from npa_pulumi.bridge.local_providers import terraform_env
        from npa_pulumi.components._cloud import cloud_for

        local = cloud_for(inputs.cloud, inputs.profile, inputs.identity.region, inputs.identity.tenant_id)
        directory = getattr(local, "directory", None)  # the local adapter's database directory
        if not isinstance(directory, Path):
            raise RuntimeError("the local cloud adapter names no directory for its Terraform providers")
        extra.update(terraform_env(cache_dir() / "terraform-cli", directory))
    runtime_tfvars = inputs.runtime_tfvars or {}
    # A registry's providers are downloaded once into a plugin cache every stack shares. The local cloud's
    # are already on disk (the filesystem mirror), and init links each work dir straight to them: a shared
    # cache would only add a hazard, since an init with no lock file entry re-installs a provider into the
    # cache, under another stack's running terraform.
    plugin_cache = None if from_local_mirror else cache_dir() / "tf-plugins"
    env = runtime_env(identity, runtime_tfvars, plugin_cache, extra)
    workspace.redact = _run_time_secrets(token, runtime_tfvars)
    if workspace.root != _workspace(inputs).root:  # a preview's copy starts from the stack's init
        workspace.adopt_init(_workspace(inputs))
    workspace.init(env, plugin_cache_lock=cache_dir() / "tf-plugins.lock", recipe_digest=recipe.digest)
    if token is not None and inputs.cloud == "nebius":
        # init used the token just minted; every later terraform invocation of this call (plan, apply,
        # destroy, output) gets a freshly renewed one (bridge/credentials.py).
        workspace.renew_token = lambda: _token(inputs) or token
    return workspace, env


def _run_time_secrets(token: str | None, runtime_tfvars: Any) -> tuple[str, ...]:
    """What must not reach terraform.log: the token and every string the run-time variables carry
    (capacity-block reservations), except the policy keywords, which are not secret."""
    found = [token] if token else []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value.strip() and value.upper() not in ("AUTO", "FORBID", "STRICT"):
            found.append(value)

    walk(runtime_tfvars)
    return tuple(found)


def _outs(
    props: dict[str, Any],
    workspace: TerraformWorkspace,
    env: dict[str, str],
    drift: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    from npa_pulumi.bridge.terraform import split_outputs

    plain, sensitive = split_outputs(workspace.outputs(env))
    outputs = TerraformModuleOutputs(
        outputs=plain, sensitive_outputs=sensitive, tf_state=workspace.read_state_text(), drift=drift or []
    )
    return with_outputs(props, outputs)


# The drift entry of a recipe that declares no live objects, when Terraform's own plan (after a refresh)
# has work to do: a plain apply repairs it.
_PLAN_DRIFT = {
    "address": "",
    "kind": "terraform",
    "id": "",
    "reason": "terraform plan shows changes after a refresh",
}


def _drift(props: dict[str, Any], workspace: TerraformWorkspace, env: dict[str, str]) -> list[dict[str, str]]:
    """What changed outside the fleet: the recipe's declared objects checked against the cloud, else
    Terraform's own plan after the refresh (recipes whose provider reads the cloud)."""
    from npa_pulumi.bridge.drift import declared_objects, live_drift
    from npa_pulumi.bridge.terraform import split_outputs
    from npa_pulumi.components._cloud import cloud_for

    inputs = TerraformModuleInputs.model_validate(props)
    plain, _ = split_outputs(workspace.outputs(env))
    declared = declared_objects(plain)
    if declared is None:
        return [dict(_PLAN_DRIFT)] if workspace.plan_changes(env) else []
    identity = inputs.identity
    cloud = cloud_for(inputs.cloud, inputs.profile, identity.region, identity.tenant_id)
    return [d.as_dict() for d in live_drift(cloud, identity.parent_id, declared)]


def plan_preview(
    props: dict[str, Any], deployed: bool = False, stored_state: Callable[[], str | None] | None = None
) -> dict[str, Any]:
    """Terraform's own plan for a preview, summarized (npa_pulumi/bridge/plan_summary.py), without touching
    the stack: the recipe and the stack's current Terraform state are copied into a temporary work dir, so
    no state is written and no lock is taken or left in the stack's work dir (`-lock=false` besides).
    `deployed`: the stack has a cluster. Without a local Terraform state (a CI runner, another machine)
    `stored_state` fetches the state the bridge keeps in the stack (its `tf_state` secret output); without
    either, a plan would show every resource as new, so none is run."""
    import tempfile
    from pathlib import Path

    from npa_pulumi.bridge.plan_summary import summarize
    from npa_pulumi.bridge.terraform import TerraformWorkspace
    from npa_pulumi.cloud.redaction import mask_secrets

    inputs = TerraformModuleInputs.model_validate(props)
    state = _workspace(inputs).read_state_text()
    if deployed and state is None and stored_state is not None:
        state = stored_state()
    if deployed and state is None:
        return {
            "skipped": "no Terraform state on this machine for a deployed stack (run `refresh` here first); "
            "no Terraform plan"
        }
    with tempfile.TemporaryDirectory(prefix="npa-plan-") as tmp:
        scratch = TerraformWorkspace(root=Path(tmp) / "work")
        workspace, env = _prepare(props, state, same_recipe=False, workspace=scratch)
        plan = workspace.plan_json(env, Path(tmp))
        secrets = workspace.redact
    summary: dict[str, Any] = mask_secrets(summarize(plan), secrets)
    return summary


class AdoptionRefused(RuntimeError):
    """An adopted state that Terraform would change: nothing is applied."""


class TerraformModuleProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        adopted = props.get("adopted_state")
        if adopted:
            return self._adopt(props, str(adopted))
        workspace, env = _prepare(props, None)
        workspace.apply(env)
        return CreateResult(id_=str(props["work_key"]), outs=_outs(props, workspace, env))

    def _adopt(self, props: dict[str, Any], state: str) -> CreateResult:
        """Take over a cluster another tool's Terraform deployed: its state, restored; a plan that must
        have nothing to do (so no apply ever runs on adoption); its outputs, as after an apply."""
        workspace, env = _prepare(props, state)
        if workspace.plan_changes(env):
            raise AdoptionRefused(
                "adoption refused: Terraform's plan for the adopted state has changes (the spec's tfvars, "
                "identity or recipe differ from what was deployed); nothing was applied"
            )
        return CreateResult(id_=str(props["work_key"]), outs=_outs(props, workspace, env))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _APPLY_KEYS if olds.get(k) != news.get(k)]
        if olds.get("drift"):
            changed.append("drift")  # a refresh found objects changed outside the fleet: re-apply
        replaces = ["work_key"] if olds.get("work_key") != news.get("work_key") else []
        return DiffResult(changes=bool(changed or replaces), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        workspace, env = _prepare(news, olds.get("tf_state"))
        drifted = [str(d.get("address")) for d in olds.get("drift") or [] if d.get("address")]
        workspace.apply(env, replace=drifted)
        return UpdateResult(outs=_outs(news, workspace, env))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        workspace, env = _prepare(props, props.get("tf_state"), same_recipe=False)
        workspace.refresh(env)
        return ReadResult(id_=id_, outs=_outs(props, workspace, env, _drift(props, workspace, env)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        workspace, env = _prepare(props, props.get("tf_state"), same_recipe=False)
        workspace.destroy(env)
        if not workspace.state_is_empty():
            raise RuntimeError(
                f"terraform destroy left resources in {workspace.state_path}; state kept for a retry"
            )
        # Verified empty: no work dir, state copy or tfvars stays behind; the log moves to the fleet's logs.
        inputs = TerraformModuleInputs.model_validate(props)
        workspace.retire(logs_dir(inputs.fleet) / f"{inputs.work_key}.terraform.log")


class TerraformModule(pulumi.dynamic.Resource, module="npa", name="TerraformModule"):
    outputs: pulumi.Output[dict[str, Any]]
    sensitive_outputs: pulumi.Output[dict[str, Any]]
    tf_state: pulumi.Output[str]
    drift: pulumi.Output[list[dict[str, str]]]

    def __init__(
        self, resource_name: str, args: TerraformModuleArgs, opts: pulumi.ResourceOptions | None = None
    ):
        opts = pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                additional_secret_outputs=[
                    "runtime_tfvars",
                    "sensitive_outputs",
                    "tf_state",
                    "adopted_state",
                ],
                custom_timeouts=pulumi.CustomTimeouts(create="180m", update="180m", delete="120m"),
            ),
        )
        props = as_props(args)
        if props.get("adopted_state") is None:
            del props["adopted_state"]  # only an adoption carries it: no other stack's inputs change
        else:
            props["adopted_state"] = pulumi.Output.secret(props["adopted_state"])
        super().__init__(
            TerraformModuleProvider(),
            resource_name,
            {**props, "outputs": None, "sensitive_outputs": None, "tf_state": None, "drift": None},
            opts,
        )
