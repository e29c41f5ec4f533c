"""`FleetKubeRay`: the fleet's reviewed CPU RayCluster template, as pulumi-kubernetes resources of the
cluster stack (a child of `FleetClusterObjects`, through its provider).

It creates, in this order of dependencies:

* KubeRay's own CRDs at the pinned release (RayCluster, RayJob, RayService: the operator watches all
  three), from the toolchain's copy of the module (`make tools`), applied server-side (a CRD is too large
  for client-side apply's last-applied annotation);
* the operator: namespace `kuberay-system`, service account, cluster role and binding, and a Deployment of
  the pinned operator image (on the local cloud the cluster's agent runs the pinned binary for it);
* namespace `ray`, a NetworkPolicy admitting ingress only from inside it, and the one RayCluster
  (npa_pulumi/kube/kuberay.py builds its spec: pinned Ray image, autoscaling off, no sidecars, non-root).

Every object carries the fleet's labels; `preview` lists each of them, and the policy pack checks the
RayCluster keeps the template's properties. Disabling KubeRay drops this component from the program, so
the next `up` deletes exactly these objects (the RayCluster first: it depends on the rest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi

# Resolved at import, for the reason components/in_cluster.py gives.
from pulumi_kubernetes import Provider
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import Namespace, ServiceAccount
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import NetworkPolicy
from pulumi_kubernetes.rbac.v1 import ClusterRole, ClusterRoleBinding

from npa_pulumi.kube import kuberay as template


@dataclass(frozen=True)
class FleetKubeRayArgs:
    provider: Provider
    labels: dict[str, str]
    template: template.RayTemplate
    crds: list[dict[str, Any]]  # KubeRay's CRD documents (runtime.toolchain.kuberay_crd_files)


def load_crds() -> list[dict[str, Any]]:
    from npa_pulumi.runtime.toolchain import kuberay_crd_files

    return [json.loads(path.read_text()) for path in kuberay_crd_files()]


class FleetKubeRay(pulumi.ComponentResource):
    raycluster: pulumi.Output[str]

    def __init__(self, name: str, args: FleetKubeRayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("npa:fleet:FleetKubeRay", name, args.template.to_json(), opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        labels = {**args.labels, "app.kubernetes.io/part-of": "kuberay"}
        crds = [self._crd(name, crd, labels, child) for crd in args.crds]
        operator = self._operator(name, args.template, labels, child, crds)
        namespace = Namespace(
            f"{name}-namespace",
            metadata=ObjectMetaArgs(name=template.RAY_NAMESPACE, labels=labels),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[namespace]))
        NetworkPolicy(
            f"{name}-network-policy",
            metadata=ObjectMetaArgs(
                name=template.NETWORK_POLICY_NAME, namespace=template.RAY_NAMESPACE, labels=labels
            ),
            spec=template.network_policy_spec(),
            opts=in_namespace,
        )
        raycluster = CustomResource(
            f"{name}-raycluster",
            api_version="ray.io/v1",
            kind="RayCluster",
            metadata=ObjectMetaArgs(
                name=template.RAYCLUSTER_NAME, namespace=template.RAY_NAMESPACE, labels=labels
            ),
            spec=template.raycluster_spec(args.template),
            opts=pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=[*crds, operator])
            ),
        )
        self.raycluster = raycluster.id.apply(
            lambda _id: f"{template.RAY_NAMESPACE}/{template.RAYCLUSTER_NAME}"
        )
        self.register_outputs({"raycluster": self.raycluster})

    @staticmethod
    def _crd(
        name: str, crd: dict[str, Any], labels: dict[str, str], opts: pulumi.ResourceOptions
    ) -> CustomResource:
        meta = crd["metadata"]
        return CustomResource(
            f"{name}-crd-{meta['name'].split('.')[0]}",
            api_version="apiextensions.k8s.io/v1",
            kind="CustomResourceDefinition",
            metadata=ObjectMetaArgs(
                name=meta["name"], labels=labels, annotations=dict(meta.get("annotations") or {})
            ),
            spec=crd["spec"],
            opts=opts,
        )

    @staticmethod
    def _operator(
        name: str,
        ray: template.RayTemplate,
        labels: dict[str, str],
        opts: pulumi.ResourceOptions,
        crds: list[CustomResource],
    ) -> Deployment:
        operator_labels = {**labels, "app.kubernetes.io/name": template.OPERATOR_NAME}
        namespace = Namespace(
            f"{name}-operator-namespace",
            metadata=ObjectMetaArgs(name=template.OPERATOR_NAMESPACE, labels=labels),
            opts=opts,
        )
        scoped = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace]))
        meta = ObjectMetaArgs(
            name=template.OPERATOR_NAME, namespace=template.OPERATOR_NAMESPACE, labels=operator_labels
        )
        account = ServiceAccount(f"{name}-operator-account", metadata=meta, opts=scoped)
        role = ClusterRole(
            f"{name}-operator-role",
            metadata=ObjectMetaArgs(name=template.OPERATOR_NAME, labels=operator_labels),
            rules=template.OPERATOR_RULES,
            opts=opts,
        )
        binding = ClusterRoleBinding(
            f"{name}-operator-binding",
            metadata=ObjectMetaArgs(name=template.OPERATOR_NAME, labels=operator_labels),
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": template.OPERATOR_NAME,
            },
            subjects=[
                {
                    "kind": "ServiceAccount",
                    "name": template.OPERATOR_NAME,
                    "namespace": template.OPERATOR_NAMESPACE,
                }
            ],
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role, account])),
        )
        selector = {"app.kubernetes.io/name": template.OPERATOR_NAME}
        return Deployment(
            f"{name}-operator",
            metadata=meta,
            spec={
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": operator_labels},
                    "spec": template.operator_pod_spec(ray),
                },
            },
            opts=pulumi.ResourceOptions.merge(scoped, pulumi.ResourceOptions(depends_on=[*crds, binding])),
        )
