"""`FleetClusterObjects`: what the fleet owns inside a cluster, as pulumi-kubernetes resources of the
cluster stack, created through a `kubernetes.Provider` built from the cluster's kubeconfig.

* the `npa-system` namespace, where the fleet keeps its own objects;
* for RTX rendering clusters, the ConfigMap `gpu-driver-package-repositories` with the spec's
  `gpu_driver_package_repositories`, in the GPU operator's namespace: the operator's `driver.repoConfig`
  names it, and the driver pods can mount only ConfigMaps of their own namespace. The namespace is the
  recipe's (its Helm release creates it); the fleet owns only the ConfigMap;
* for clusters with `kuberay.enabled`, the reviewed KubeRay template (components/kuberay.py).

`preview` shows their changes and policies see them like any other resource; `destroy` deletes them before
the cluster goes (they depend on it). A provider that can no longer reach a deleted cluster drops them from
state instead of failing the destroy (`delete_unreachable`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

# pulumi_kubernetes loads its submodules lazily, and that is not thread-safe: two stacks' programs
# running at once in the orchestrator's threads can see a half-loaded `core.v1`. Resolving every name this
# module uses here, while the import lock of this module is held, loads them exactly once.
from pulumi_kubernetes import Provider
from pulumi_kubernetes.core.v1 import ConfigMap, Namespace
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from npa_pulumi.components.kuberay import FleetKubeRay, FleetKubeRayArgs, load_crds
from npa_pulumi.kube.gpu_operator import OPERATOR_NAMESPACE, REPOSITORIES_CONFIGMAP
from npa_pulumi.kube.kuberay import RayTemplate

FLEET_NAMESPACE = "npa-system"


@dataclass(frozen=True)
class FleetClusterObjectsArgs:
    kubeconfig: pulumi.Input[str]
    fleet: str
    project_key: str
    cluster: str
    rtx_driver_repositories: dict[str, str] | None = None
    kuberay: RayTemplate | None = None


class FleetClusterObjects(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    rtx_configmap: pulumi.Output[str]
    raycluster: pulumi.Output[str]

    def __init__(self, name: str, args: FleetClusterObjectsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "npa:fleet:FleetClusterObjects",
            name,
            {"fleet": args.fleet, "project_key": args.project_key, "cluster": args.cluster},
            opts,
        )
        provider = Provider(
            f"{name}-kubernetes",
            kubeconfig=args.kubeconfig,
            delete_unreachable=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        labels = {
            "app.kubernetes.io/managed-by": "npa-pulumi",
            "npa.nebius.com/fleet": args.fleet,
            "npa.nebius.com/project": args.project_key,
            "npa.nebius.com/cluster": args.cluster,
        }
        namespace = Namespace(
            f"{name}-namespace",
            metadata=ObjectMetaArgs(name=FLEET_NAMESPACE, labels=labels),
            opts=child,
        )
        self.namespace = namespace.metadata.apply(lambda m: m.name or FLEET_NAMESPACE)
        if args.rtx_driver_repositories is not None:
            configmap = ConfigMap(
                f"{name}-rtx-repositories",
                metadata=ObjectMetaArgs(
                    name=REPOSITORIES_CONFIGMAP, namespace=OPERATOR_NAMESPACE, labels=labels
                ),
                data=dict(args.rtx_driver_repositories),
                opts=child,
            )
            self.rtx_configmap = configmap.metadata.apply(lambda m: f"{m.namespace}/{m.name}")
        else:
            self.rtx_configmap = pulumi.Output.from_input("")
        if args.kuberay is not None:
            ray = FleetKubeRay(
                f"{name}-kuberay",
                FleetKubeRayArgs(provider=provider, labels=labels, template=args.kuberay, crds=load_crds()),
                pulumi.ResourceOptions(parent=self),
            )
            self.raycluster = ray.raycluster
        else:
            self.raycluster = pulumi.Output.from_input("")
        self.register_outputs(
            {"namespace": self.namespace, "rtx_configmap": self.rtx_configmap, "raycluster": self.raycluster}
        )
