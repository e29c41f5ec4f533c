"""`verify_fabric`: the fabric check (NCCL all-reduce bus bandwidth on every GPU node and across the
InfiniBand fabric, npa_pulumi/kube/fabric_check.py) on deployed clusters, at any later time (after a driver
change, before a large run), through each cluster's registered kubeconfig.

Read-only like the other verifiers (its probe pods and rendezvous Services are deleted by UID and proven
gone), with their body (engine/verification/verifiers.py: selectors, concurrency, evidence dir). It is
refused, naming them, while pods other than the GPU operator's hold GPUs: the benchmark needs every GPU of a
node. A cluster where the check does not apply (no multi-GPU NVLink preset, or disabled in its spec) is
`skipped` with `not-applicable` evidence.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from npa_pulumi.engine.verification.verifiers import VerifyOptions, _entry, _registered_kubeconfig, _run
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.plan.gates import fabric_check_config
from npa_pulumi.plan.naming import kube_context_name

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.plan import Target


def verify_fabric(fleet: FleetContext, options: VerifyOptions) -> FleetResult:
    return _run(fleet, options, "verify-fabric", _verify_fabric_one)


def _verify_fabric_one(fleet: FleetContext, target: Target, options: VerifyOptions) -> StackResult:
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.fabric_check import not_applicable, run_fabric_check

    context = kube_context_name(fleet.spec.name, target.project_key, target.cluster_name)
    config = dataclasses.replace(fabric_check_config(target.cluster), timeout_s=options.timeout_s)
    if config.not_applicable:
        return _entry(
            target,
            context,
            "skipped",
            validation="fabric",
            health=not_applicable(config),
            error=f"the fabric check does not apply: {config.not_applicable}",
        )
    found = _registered_kubeconfig(fleet, target, context, validation="fabric")
    if isinstance(found, StackResult):
        return found
    text, cluster_id = found
    evidence = run_fabric_check(
        lambda t: KubeClient.from_kubeconfig(text, timeout_s=t), config, refuse_while_busy=True
    )
    if evidence["passed"]:
        return _entry(target, context, "ready", validation="fabric", health=evidence, cluster_id=cluster_id)
    status = "failed" if str(evidence["reason"]).startswith("refused") else "not-ready"
    return _entry(
        target,
        context,
        status,
        validation="fabric",
        health=evidence,
        cluster_id=cluster_id,
        error=f"fabric verification failed: {evidence['reason']}",
    )
