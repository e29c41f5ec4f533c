# What upstream's helm.tf installs into the cluster (GPU operator or device plugin, the filesystem CSI
# driver, KubeRay), recorded in the simulator as the cluster's addons: the cluster's Kubernetes agent
# then keeps the matching objects (DaemonSets, StorageClasses, the RayCluster) in its API server.
# Like a Helm release, it is updated in place when its inputs change, and goes away with the cluster.

locals {
  has_gpus = var.gpu_node_groups > 0 && local.gpu_node_count > 0
  addons = {
    gpu_driver = local.has_gpus ? (var.gpu_nodes_driverfull_image ? "managed-image" : "operator") : ""
    filestore  = var.enable_filestore
    mig = local.has_gpus && coalesce(var.mig_strategy, "none") != "none" ? {
      strategy = var.mig_strategy
      config   = coalesce(var.mig_parted_config, "all-balanced")
      # The GPU operator chart's version pins, as its ClusterPolicy and DaemonSet images carry them.
      versions = {
        operator      = var.gpu_operator_version == null ? "" : var.gpu_operator_version
        driver        = var.gpu_driver_version == null ? "" : var.gpu_driver_version
        device_plugin = var.gpu_device_plugin_version == null ? "" : var.gpu_device_plugin_version
        gfd           = var.gpu_gfd_version == null ? "" : var.gpu_gfd_version
        mig_manager   = var.gpu_mig_manager_version == null ? "" : var.gpu_mig_manager_version
      }
    } : null
    # The RTX rendering profile's operator values and their revision (JSON text, an `any` as below): the
    # revision is what changes the release when write-only values or the repository files change.
    rtx_driver = local.has_gpus && !var.gpu_nodes_driverfull_image && var.gpu_operator_rtx_driver_profile != null ? jsonencode({
      platform = try(var.gpu_operator_rtx_driver_profile.platform, "")
      preset   = try(var.gpu_operator_rtx_driver_profile.preset, "")
      values   = try(var.gpu_operator_rtx_driver_profile.values, null)
      revision = try(var.gpu_operator_rtx_driver_profile.revision, "")
    }) : null
    # JSON text: the CPU RayCluster's settings are an `any`, which a conditional cannot unify with null.
    kuberay = var.enable_kuberay_cluster ? (var.kuberay_cpu_cluster == null ? "{}" : jsonencode(var.kuberay_cpu_cluster)) : null
  }
}

resource "terraform_data" "cluster_addons" {
  # A provisioner runs only on create, so a change of addons replaces this resource (a new Helm revision).
  triggers_replace = { cluster_id = local.cluster_id, addons = jsonencode(local.addons) }
  depends_on       = [terraform_data.cluster]

  provisioner "local-exec" {
    command = "${local.npa_api} set_cluster_addons --args-env NPA_LOCAL_API_ARGS"
    environment = {
      NPA_LOCAL_API_ARGS = jsonencode({ cluster_id = local.cluster_id, addons = local.addons })
    }
  }
}
