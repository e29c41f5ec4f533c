"""Pulumi ComponentResources of an npa fleet (installed as `npa_pulumi.components`).

Each takes one typed `*Args` dataclass (components/args.py says how the dynamic resources beneath them are
typed). Importing this package imports the Pulumi SDK; the rest of npa_pulumi does not need it.
"""

from npa_pulumi.components.cluster_access import ClusterCredentials, ClusterCredentialsArgs
from npa_pulumi.components.fleet_project import FleetProject, FleetProjectArgs
from npa_pulumi.components.gpu_health import GpuHealthGate, GpuHealthGateArgs
from npa_pulumi.components.in_cluster import FleetClusterObjects, FleetClusterObjectsArgs
from npa_pulumi.components.k8s_training_cluster import K8sTrainingCluster, K8sTrainingClusterArgs
from npa_pulumi.components.object_storage import ObjectStorage, ObjectStorageArgs
from npa_pulumi.components.project_network import ProjectNetwork, ProjectNetworkArgs
from npa_pulumi.components.terraform_module import TerraformModule, TerraformModuleArgs

__all__ = [
    "ClusterCredentials",
    "ClusterCredentialsArgs",
    "FleetClusterObjects",
    "FleetClusterObjectsArgs",
    "FleetProject",
    "FleetProjectArgs",
    "GpuHealthGate",
    "GpuHealthGateArgs",
    "K8sTrainingCluster",
    "K8sTrainingClusterArgs",
    "ObjectStorage",
    "ObjectStorageArgs",
    "ProjectNetwork",
    "ProjectNetworkArgs",
    "TerraformModule",
    "TerraformModuleArgs",
]
