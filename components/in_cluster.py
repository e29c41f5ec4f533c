"""`FleetClusterObjects`: what the fleet owns inside a cluster, as pulumi-kubernetes resources of the
cluster stack, created through a `kubernetes.Provider` built from the cluster's kubeconfig.

* the `npa-system` namespace, where the fleet keeps its own objects;
* for RTX rendering clusters, the ConfigMap `gpu-driver-package-repositories` with the spec's
  `gpu_driver_package_repositories` (what the RTX driver configuration reads).

`preview` shows their changes and policies see them like any other resource; `destroy` deletes them before
the cluster goes (they depend on it). A provider that can no longer reach a deleted cluster drops them from
state instead of failing the destroy (`delete_unreachable`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

FLEET_NAMESPACE = "npa-system"
RTX_REPOSITORIES_CONFIGMAP = "gpu-driver-package-repositories"


@dataclass(frozen=True)
class FleetClusterObjectsArgs:
    kubeconfig: pulumi.Input[str]
    fleet: str
    project_key: str
    cluster: str
    rtx_driver_repositories: dict[str, str] | None = None


class FleetClusterObjects(pulumi.ComponentResource):
    namespace: pulumi.Output[str]
    rtx_configmap: pulumi.Output[str]

    def __init__(self, name: str, args: FleetClusterObjectsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "npa:fleet:FleetClusterObjects",
            name,
            {"fleet": args.fleet, "project_key": args.project_key, "cluster": args.cluster},
            opts,
        )
        provider = k8s.Provider(
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
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=FLEET_NAMESPACE, labels=labels),
            opts=child,
        )
        self.namespace = namespace.metadata.apply(lambda m: m.name or FLEET_NAMESPACE)
        if args.rtx_driver_repositories is not None:
            configmap = k8s.core.v1.ConfigMap(
                f"{name}-rtx-repositories",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=RTX_REPOSITORIES_CONFIGMAP, namespace=self.namespace, labels=labels
                ),
                data=dict(args.rtx_driver_repositories),
                opts=child,
            )
            self.rtx_configmap = configmap.metadata.apply(lambda m: f"{m.namespace}/{m.name}")
        else:
            self.rtx_configmap = pulumi.Output.from_input("")
        self.register_outputs({"namespace": self.namespace, "rtx_configmap": self.rtx_configmap})
