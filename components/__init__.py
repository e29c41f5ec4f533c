"""Pulumi ComponentResources of an npa fleet (installed as `npa_pulumi.components`).

Each takes one typed `*Args` dataclass (components/args.py says how the dynamic resources beneath them are
typed). The names below are loaded on first use (PEP 562): the engine's provider host unpickles one
provider class from one module (say `terraform_module`), and importing this package eagerly made it load
every component, pulumi-kubernetes' generated types and the planner with them (~0.7 s of CPU per host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.runtime.lazy_names import lazy_names

if TYPE_CHECKING:
    from npa_pulumi.components.cluster_access import ClusterCredentials, ClusterCredentialsArgs
    from npa_pulumi.components.fleet_project import FleetProject, FleetProjectArgs
    from npa_pulumi.components.gpu_fabric import GpuFabricCheck, GpuFabricCheckArgs
    from npa_pulumi.components.gpu_health import GpuHealthGate, GpuHealthGateArgs
    from npa_pulumi.components.in_cluster import FleetClusterObjects, FleetClusterObjectsArgs
    from npa_pulumi.components.k8s_training_cluster import K8sTrainingCluster, K8sTrainingClusterArgs
    from npa_pulumi.components.kuberay import FleetKubeRay, FleetKubeRayArgs
    from npa_pulumi.components.kuberay_gate import KubeRayGate, KubeRayGateArgs
    from npa_pulumi.components.object_storage import ObjectStorage, ObjectStorageArgs
    from npa_pulumi.components.project_network import ProjectNetwork, ProjectNetworkArgs
    from npa_pulumi.components.slurm_gate import SlurmGate, SlurmGateArgs
    from npa_pulumi.components.soperator_cluster import SoperatorCluster, SoperatorClusterArgs
    from npa_pulumi.components.terraform_module import TerraformModule, TerraformModuleArgs

_MODULE_OF = {
    "ClusterCredentials": "cluster_access",
    "ClusterCredentialsArgs": "cluster_access",
    "FleetClusterObjects": "in_cluster",
    "FleetClusterObjectsArgs": "in_cluster",
    "FleetProject": "fleet_project",
    "FleetProjectArgs": "fleet_project",
    "GpuFabricCheck": "gpu_fabric",
    "GpuFabricCheckArgs": "gpu_fabric",
    "GpuHealthGate": "gpu_health",
    "GpuHealthGateArgs": "gpu_health",
    "FleetKubeRay": "kuberay",
    "FleetKubeRayArgs": "kuberay",
    "KubeRayGate": "kuberay_gate",
    "KubeRayGateArgs": "kuberay_gate",
    "K8sTrainingCluster": "k8s_training_cluster",
    "K8sTrainingClusterArgs": "k8s_training_cluster",
    "ObjectStorage": "object_storage",
    "ObjectStorageArgs": "object_storage",
    "ProjectNetwork": "project_network",
    "ProjectNetworkArgs": "project_network",
    "SlurmGate": "slurm_gate",
    "SlurmGateArgs": "slurm_gate",
    "SoperatorCluster": "soperator_cluster",
    "SoperatorClusterArgs": "soperator_cluster",
    "TerraformModule": "terraform_module",
    "TerraformModuleArgs": "terraform_module",
}

__all__ = [
    "ClusterCredentials",
    "ClusterCredentialsArgs",
    "FleetClusterObjects",
    "FleetClusterObjectsArgs",
    "FleetKubeRay",
    "FleetKubeRayArgs",
    "FleetProject",
    "FleetProjectArgs",
    "GpuFabricCheck",
    "GpuFabricCheckArgs",
    "GpuHealthGate",
    "GpuHealthGateArgs",
    "K8sTrainingCluster",
    "K8sTrainingClusterArgs",
    "KubeRayGate",
    "KubeRayGateArgs",
    "ObjectStorage",
    "ObjectStorageArgs",
    "ProjectNetwork",
    "ProjectNetworkArgs",
    "SlurmGate",
    "SlurmGateArgs",
    "SoperatorCluster",
    "SoperatorClusterArgs",
    "TerraformModule",
    "TerraformModuleArgs",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals())
