"""`FleetKubeRay` with Pulumi's resource mocks (no engine): the objects it registers, in the shape the
engine and the policy pack receive them (camelCase Kubernetes fields, verbatim), and the policy passing
them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from npa_pulumi.kube import kuberay
from npa_pulumi.policies import catalog
from npa_pulumi.policies.fleet_guardrails_lib.checks import CheckContext, check_kuberay_reviewed_template
from npa_pulumi.policies.fleet_guardrails_lib.facts import ClusterRegistry, Subject
from npa_pulumi.runtime.pins import kuberay_operator_image
from npa_pulumi.spec import constants as c

TEMPLATE = kuberay.RayTemplate(
    worker_replicas=3,
    worker_cpus=2,
    worker_memory_gib=4,
    ray_version=c.RAY_VERSION,
    image=c.RAY_IMAGE,
    operator_image=kuberay_operator_image(),
    cpu_node_group="c1-ng-cpu",
)
CRDS = [
    {"metadata": {"name": f"{kind}.ray.io"}, "spec": {"group": "ray.io", "names": {"plural": kind}}}
    for kind in ("rayclusters", "rayjobs", "rayservices")
]


class Recording(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[tuple[str, str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append((args.typ, args.name, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


@pytest.fixture
def mocks() -> Recording:
    asyncio.set_event_loop(asyncio.new_event_loop())
    recording = Recording()
    pulumi.runtime.set_mocks(recording, preview=False)
    return recording


def engine_test(function: Callable[..., Any]) -> Callable[..., Any]:
    wrapped: Callable[..., Any] = pulumi.runtime.test(function)  # type: ignore[no-untyped-call]
    return wrapped


@engine_test
def test_the_template_as_the_engine_and_the_policies_see_it(mocks: Recording) -> Any:
    from pulumi_kubernetes import Provider

    from npa_pulumi.components import FleetKubeRay, FleetKubeRayArgs

    provider = Provider("k", kubeconfig="{}")
    labels = {kuberay.MANAGED_BY: kuberay.FLEET_MANAGER}
    ray = FleetKubeRay(
        "c1-kuberay", FleetKubeRayArgs(provider=provider, labels=labels, template=TEMPLATE, crds=CRDS)
    )

    def check(name: str) -> None:
        assert name == "ray/ray-cluster"
        types = sorted(t for t, _n, _i in mocks.resources if t.startswith("kubernetes:"))
        assert types == sorted(
            [
                *["kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"] * 3,
                "kubernetes:core/v1:Namespace",
                "kubernetes:core/v1:Namespace",
                "kubernetes:core/v1:ServiceAccount",
                "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
                "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                "kubernetes:apps/v1:Deployment",
                "kubernetes:networking.k8s.io/v1:NetworkPolicy",
                "kubernetes:ray.io/v1:RayCluster",
            ]
        )
        by_type = {t: i for t, _n, i in mocks.resources}
        raycluster = by_type[catalog.RAYCLUSTER]
        assert raycluster["spec"] == kuberay.raycluster_spec(TEMPLATE)
        assert raycluster["metadata"]["labels"][kuberay.MANAGED_BY] == kuberay.FLEET_MANAGER
        ctx = CheckContext(registry=ClusterRegistry(), secrets_visible=True)
        subject = Subject(resource_type=catalog.RAYCLUSTER, props=raycluster, name="ray")
        assert check_kuberay_reviewed_template(subject, {}, ctx) == []
        deployment = by_type["kubernetes:apps/v1:Deployment"]
        assert deployment["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "kuberay-operator"}
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == kuberay_operator_image()
        policy = by_type["kubernetes:networking.k8s.io/v1:NetworkPolicy"]
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        assert policy["metadata"]["namespace"] == "ray"

    return ray.raycluster.apply(check)
