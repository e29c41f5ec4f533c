"""Pulumi ComponentResources of an npa fleet (installed as `npa_pulumi.components`).

Importing this package imports the Pulumi SDK; the rest of npa_pulumi does not need it.
"""

from npa_pulumi.components.cluster_access import ClusterCredentials
from npa_pulumi.components.fleet_project import FleetProject
from npa_pulumi.components.gpu_health import GpuHealthGate
from npa_pulumi.components.in_cluster import FleetClusterObjects, FleetClusterObjectsArgs
from npa_pulumi.components.k8s_training_cluster import K8sTrainingCluster
from npa_pulumi.components.object_storage import ObjectStorage
from npa_pulumi.components.project_network import ProjectNetwork
from npa_pulumi.components.terraform_module import TerraformModule

__all__ = [
    "ClusterCredentials",
    "FleetClusterObjects",
    "FleetClusterObjectsArgs",
    "FleetProject",
    "GpuHealthGate",
    "K8sTrainingCluster",
    "ObjectStorage",
    "ProjectNetwork",
    "TerraformModule",
]
