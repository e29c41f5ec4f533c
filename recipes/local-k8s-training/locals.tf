locals {
  # Every provisioner calls the simulator's machine-facing API with the interpreter in $NPA_PYTHON (which
  # can import npa_pulumi), falling back to python3. Arguments travel as JSON in $NPA_LOCAL_API_ARGS, so
  # no shell quoting is involved. The local cloud's location comes from $NPA_LOCAL_CLOUD_DIR, inherited
  # from terraform's environment. Destroy-time provisioners may only reference `self`, so they spell the
  # same command out instead of using this local.
  npa_api = "\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"

  # Per-region platform defaults, as upstream's locals.regions_default.
  regions_default = {
    "eu-west1"    = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-h200-sxm", gpu_nodes_preset = "8gpu-128vcpu-1600gb", infiniband_fabric = "" }
    "eu-north1"   = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-h100-sxm", gpu_nodes_preset = "8gpu-128vcpu-1600gb", infiniband_fabric = "" }
    "eu-north2"   = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-h200-sxm", gpu_nodes_preset = "8gpu-128vcpu-1600gb", infiniband_fabric = "" }
    "us-central1" = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-h200-sxm", gpu_nodes_preset = "8gpu-128vcpu-1600gb", infiniband_fabric = "" }
    "me-west1"    = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-b200-sxm-a", gpu_nodes_preset = "8gpu-160vcpu-1792gb", infiniband_fabric = "" }
    "uk-south1"   = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-b300-sxm", gpu_nodes_preset = "8gpu-192vcpu-2768gb", infiniband_fabric = "" }
    "eu-west2"    = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-b300-sxm", gpu_nodes_preset = "8gpu-192vcpu-2768gb", infiniband_fabric = "eu-west2-a" }
    "us-north1"   = { cpu_nodes_platform = "cpu-d3", cpu_nodes_preset = "16vcpu-64gb", gpu_nodes_platform = "gpu-b300-sxm", gpu_nodes_preset = "8gpu-192vcpu-2768gb", infiniband_fabric = "" }
  }
  region_default = local.regions_default[var.region]

  cpu_platform = coalesce(var.cpu_nodes_platform, local.region_default.cpu_nodes_platform)
  cpu_preset   = coalesce(var.cpu_nodes_preset, local.region_default.cpu_nodes_preset)
  gpu_platform = coalesce(var.gpu_nodes_platform, local.region_default.gpu_nodes_platform)
  gpu_preset   = coalesce(var.gpu_nodes_preset, local.region_default.gpu_nodes_preset)

  # An autoscaled group starts at its minimum (min = max when min_size is null), as upstream.
  cpu_node_count = var.cpu_nodes_autoscaling.enabled ? try(coalesce(var.cpu_nodes_autoscaling.min_size, var.cpu_nodes_autoscaling.max_size), 0) : var.cpu_nodes_fixed_count
  gpu_node_count = var.gpu_nodes_autoscaling.enabled ? try(coalesce(var.gpu_nodes_autoscaling.min_size, var.gpu_nodes_autoscaling.max_size), 0) : var.gpu_nodes_fixed_count_per_group

  reservation_policy = var.gpu_nodes_reservation_policy == null ? null : upper(var.gpu_nodes_reservation_policy.policy)
  reservation_ids    = var.gpu_nodes_reservation_policy == null ? [] : try(tolist(var.gpu_nodes_reservation_policy.reservation_ids), [])

  labels = { "library-solution" = "k8s-training" }
}
