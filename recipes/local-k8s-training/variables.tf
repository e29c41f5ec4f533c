# The k8s-training variable surface: the union of the upstream V3 and V4 revisions, plus the variables
# npa-pulumi's tfvars renderer emits for patched recipes (gpu_nodes_driver_preset, enable_gpu_cluster,
# MIG version pins, the RTX profile, filestore_mount_tag, ...). Any rendered tfvars file is accepted: no
# "undeclared variable". Variables the stand-in does not act on are declared for compatibility only; they
# are marked "(accepted, not simulated)".
#
# Types are the upstream ones where the stand-in reads the value, and `any` where it only has to accept it.

# --- identity: passed as TF_VAR_* at run time, never written to tfvars -----------------------------------

variable "tenant_id" {
  description = "Tenant ID."
  type        = string
}

variable "parent_id" {
  description = "Project ID: the parent of every resource."
  type        = string
}

variable "subnet_id" {
  description = "VPC subnet for the control plane and all node NICs."
  type        = string
}

variable "region" {
  description = "Region; must be one of the regions k8s-training knows."
  type        = string
  validation {
    condition     = contains(["eu-west1", "eu-north1", "eu-north2", "us-central1", "me-west1", "uk-south1", "eu-west2", "us-north1"], var.region)
    error_message = "The region must be one of eu-west1, eu-north1, eu-north2, us-central1, me-west1, uk-south1, eu-west2, us-north1."
  }
}

variable "iam_token" {
  description = "IAM token (upstream: for the helm/kubernetes providers). The local cloud does not check it."
  type        = string
  default     = null
  sensitive   = true
}

variable "npa_idempotency_scope" {
  description = "Stand-in only: who owns these objects (the Terraform bridge passes the stack name as TF_VAR_npa_idempotency_scope). Part of every idempotency key, so two fleets that name a cluster alike in one project never share objects."
  type        = string
  default     = ""
  nullable    = false
}

# --- cluster -------------------------------------------------------------------------------------------------

variable "cluster_name" {
  description = "Base name for the cluster, its node groups, filesystem and GPU cluster."
  type        = string
  default     = "k8s-training"
}

variable "k8s_version" {
  description = "Kubernetes minor version (e.g. 1.34); null lets the service pick."
  type        = string
  default     = null
}

variable "etcd_cluster_size" {
  description = "etcd size."
  type        = number
  default     = 3
}

variable "mk8s_cluster_public_endpoint" {
  description = "Public API endpoint."
  type        = bool
  default     = true
}

variable "enable_egress_gateway" {
  description = "Cilium egress gateway (accepted, not simulated)."
  type        = bool
  default     = false
}

variable "enable_k8s_node_group_sa" {
  description = "Node-group service account in the editors group (accepted, not simulated)."
  type        = bool
  default     = true
}

variable "node_group_strategy" {
  description = "Node group rollout strategy (accepted, not simulated)."
  type        = any
  default     = null
}

variable "ssh_user_name" {
  description = "User that cloud-init creates (accepted, not simulated)."
  type        = string
  default     = "ubuntu"
}

variable "ssh_public_key" {
  description = "SSH key for the nodes: {key} or {path} (accepted, not simulated)."
  type = object({
    key  = optional(string)
    path = optional(string, "~/.ssh/id_rsa.pub")
  })
  default = {}
}

# --- CPU nodes -----------------------------------------------------------------------------------------------

variable "cpu_nodes_fixed_count" {
  description = "CPU nodes when autoscaling is off."
  type        = number
  default     = 3
}

variable "cpu_nodes_autoscaling" {
  description = "CPU autoscaling; the group starts at min_size (or max_size when min_size is null)."
  type = object({
    enabled  = optional(bool, false)
    min_size = optional(number)
    max_size = optional(number)
  })
  default = {}
}

variable "cpu_nodes_platform" {
  description = "CPU platform; null takes the region default (cpu-d3)."
  type        = string
  default     = null
}

variable "cpu_nodes_preset" {
  description = "CPU preset; null takes the region default (16vcpu-64gb)."
  type        = string
  default     = null
}

variable "cpu_disk_type" {
  description = "CPU boot disk type."
  type        = string
  default     = "NETWORK_SSD"
}

variable "cpu_disk_size" {
  description = "CPU boot disk size in GiB (a string, as upstream)."
  type        = string
  default     = "128"
}

variable "cpu_nodes_public_ips" {
  description = "Public IPs on CPU nodes."
  type        = bool
  default     = false
}

variable "cpu_nodes_preemptible" {
  description = "Preemptible CPU nodes."
  type        = bool
  default     = false
}

# --- GPU nodes -----------------------------------------------------------------------------------------------

variable "gpu_nodes_fixed_count_per_group" {
  description = "GPU nodes per group when autoscaling is off."
  type        = number
  default     = 2
}

variable "gpu_nodes_autoscaling" {
  description = "GPU autoscaling; each group starts at min_size (or max_size when min_size is null)."
  type = object({
    enabled  = optional(bool, false)
    min_size = optional(number)
    max_size = optional(number)
  })
  default = {}
}

variable "gpu_node_groups" {
  description = "Number of GPU node groups (0 is allowed)."
  type        = number
  default     = 1
  nullable    = false
  validation {
    condition     = var.gpu_node_groups >= 0 && floor(var.gpu_node_groups) == var.gpu_node_groups
    error_message = "gpu_node_groups must be a non-negative integer."
  }
}

variable "gpu_nodes_platform" {
  description = "GPU platform; null takes the region default."
  type        = string
  default     = null
}

variable "gpu_nodes_preset" {
  description = "GPU preset; null takes the region default."
  type        = string
  default     = null
}

variable "gpu_nodes_reservation_policy" {
  description = "Capacity block group reservation: {policy = AUTO | FORBID | STRICT, reservation_ids = [...]}. STRICT draws the GPUs from the blocks instead of on-demand GPU quota."
  type = object({
    policy          = string
    reservation_ids = optional(list(string))
  })
  default = null
  validation {
    condition     = var.gpu_nodes_reservation_policy == null ? true : contains(["AUTO", "FORBID", "STRICT"], var.gpu_nodes_reservation_policy.policy)
    error_message = "gpu_nodes_reservation_policy.policy must be AUTO, FORBID or STRICT."
  }
  validation {
    condition     = var.gpu_nodes_reservation_policy == null ? true : alltrue([for id in coalesce(var.gpu_nodes_reservation_policy.reservation_ids, []) : trimspace(id) != ""])
    error_message = "gpu_nodes_reservation_policy.reservation_ids must not contain blank ids."
  }
  validation {
    condition     = var.gpu_nodes_reservation_policy == null ? true : (var.gpu_nodes_reservation_policy.policy != "FORBID" || length(coalesce(var.gpu_nodes_reservation_policy.reservation_ids, [])) == 0)
    error_message = "A FORBID reservation policy takes no reservation_ids."
  }
}

variable "gpu_disk_type" {
  description = "GPU boot disk type."
  type        = string
  default     = "NETWORK_SSD"
}

variable "gpu_disk_size" {
  description = "GPU boot disk size in GiB (a string, as upstream)."
  type        = string
  default     = "1023"
}

variable "gpu_nodes_public_ips" {
  description = "Public IPs on GPU nodes."
  type        = bool
  default     = false
}

variable "gpu_nodes_preemptible" {
  description = "Preemptible GPU nodes (they charge compute.instance.preemptible.count, not GPU quota)."
  type        = bool
  default     = false
}

variable "gpu_nodes_driverfull_image" {
  description = "MK8s driverfull image instead of the GPU Operator (accepted, not simulated)."
  type        = bool
  default     = false
}

variable "gpu_nodes_driver_preset" {
  description = "Driver preset of the driverfull image, e.g. cuda13.0 (accepted, not simulated)."
  type        = string
  default     = null
}

variable "gpu_dra" {
  description = "NVIDIA DRA driver (accepted, not simulated)."
  type        = any
  default     = {}
}

variable "gb300" {
  description = "GB300 rack path; not supported by the stand-in (rack_count must stay 0)."
  type = object({
    rack_count               = optional(number, 0)
    boot_disk_size_gibibytes = optional(number, 1024)
    local_nvme               = optional(bool, false)
  })
  default = {}
  validation {
    condition     = var.gb300.rack_count == 0
    error_message = "The local stand-in does not simulate GB300 racks; gb300.rack_count must be 0."
  }
}

variable "gpu_enable_local_disks" {
  description = "Local NVMe disks on B300 nodes (accepted, not simulated)."
  type        = bool
  default     = false
}

variable "enable_gpu_kubelet_numa" {
  description = "NUMA-aware kubelet on GPU nodes (accepted, not simulated)."
  type        = bool
  default     = false
}

variable "gpu_kubelet_numa_config" {
  description = "Custom kubelet NUMA patch (accepted, not simulated)."
  type        = any
  default     = null
}

variable "gpu_kubelet_numa_preset" {
  description = "NUMA preset (accepted, not simulated)."
  type        = string
  default     = null
}

# --- GPU clustering ------------------------------------------------------------------------------------------

variable "enable_gpu_cluster" {
  description = "Create an InfiniBand GPU cluster (V2 / npa-pulumi). Null follows V3/V4: on when infiniband_fabric is set."
  type        = bool
  default     = null
}

variable "infiniband_fabric" {
  description = "InfiniBand fabric of the GPU cluster; empty turns clustering off unless enable_gpu_cluster is true."
  type        = string
  default     = null
}

# --- GPU software stack (accepted, not simulated) ------------------------------------------------------------

variable "custom_driver" {
  description = "gpu-operator-custom instead of the marketplace operator."
  type        = bool
  default     = false
}

variable "mig_strategy" {
  description = "MIG strategy: none, single or mixed."
  type        = string
  default     = null
}

variable "mig_parted_config" {
  description = "MIG partition layout, e.g. all-balanced."
  type        = string
  default     = null
}

variable "gpu_operator_version" {
  description = "Pinned GPU Operator version (MIG)."
  type        = string
  default     = null
}

variable "gpu_driver_version" {
  description = "Pinned driver version (MIG)."
  type        = string
  default     = null
}

variable "gpu_device_plugin_version" {
  description = "Pinned device plugin version (MIG)."
  type        = string
  default     = null
}

variable "gpu_gfd_version" {
  description = "Pinned GPU feature discovery version (MIG)."
  type        = string
  default     = null
}

variable "gpu_mig_manager_version" {
  description = "Pinned MIG manager version (MIG)."
  type        = string
  default     = null
}

variable "gpu_mig_with_reboot" {
  description = "Let the MIG manager reboot nodes."
  type        = bool
  default     = false
}

variable "gpu_operator_rdma_enabled" {
  description = "RDMA in the GPU Operator."
  type        = bool
  default     = false
}

variable "gpu_operator_rtx_driver_profile" {
  description = "RTX rendering profile: {platform, preset[, package_repositories], values, revision}: the GPU operator values the profile pins and their revision."
  type        = any
  default     = null
}

variable "gpu_operator_toolkit_restart_mode" {
  description = "Container toolkit restart mode: none, signal or systemd."
  type        = string
  default     = "systemd"
}

variable "gpu_operator_toolkit_config_source" {
  description = "Container toolkit config source: command or file."
  type        = string
  default     = "file"
}

variable "mig_reconciler_kubectl_version" {
  description = "kubectl image tag of the MIG reconciler job."
  type        = string
  default     = "1.35.0"
}

# --- shared filesystem ---------------------------------------------------------------------------------------

variable "enable_filestore" {
  description = "Create (or attach) a shared filesystem and mount it on every node."
  type        = bool
  default     = false
}

variable "existing_filestore" {
  description = "ID of an existing filesystem to attach; empty (or null) creates one."
  type        = string
  default     = null
}

variable "filestore_disk_type" {
  description = "Filesystem type."
  type        = string
  default     = "NETWORK_SSD"
}

variable "filestore_disk_size_gibibytes" {
  description = "Filesystem size in GiB."
  type        = number
  default     = 1
}

variable "filestore_block_size_kibibytes" {
  description = "Filesystem block size in KiB."
  type        = number
  default     = 4
}

variable "filestore_forbid_deletion" {
  description = "forbid_deletion on the created filesystem (accepted, not simulated)."
  type        = bool
  default     = false
}

variable "filestore_mount_path" {
  description = "Where the nodes mount the shared filesystem."
  type        = string
  default     = "/mnt/data"
  nullable    = false
}

variable "filestore_mount_tag" {
  description = "virtiofs tag the filesystem is attached and mounted with (upstream hardcodes data)."
  type        = string
  default     = "data"
  nullable    = false
}

variable "filesystem_csi" {
  description = "Filesystem CSI chart settings (accepted; reported in the filesystem_csi output)."
  type = object({
    chart_repository                    = optional(string, "oci://cr.nebius.cloud/mk8s/helm")
    chart_version                       = optional(string, "0.1.5")
    image_repository                    = optional(string, "cr.nebius.cloud/mk8s/csi-mounted-fs-path")
    namespace                           = optional(string, "kube-system")
    make_default_storage_class          = optional(bool, true)
    previous_default_storage_class_name = optional(string, "compute-csi-default-sc")
  })
  default = {}
}

# --- observability (accepted, not simulated) -----------------------------------------------------------------

variable "enable_nebius_o11y_agent" {
  description = "Nebius observability agent."
  type        = bool
  default     = true
}

variable "collectK8sClusterMetrics" {
  description = "Cluster metrics for the observability agent."
  type        = bool
  default     = false
}

variable "enable_grafana" {
  description = "Marketplace Grafana."
  type        = bool
  default     = true
}

variable "enable_prometheus" {
  description = "Local Prometheus."
  type        = bool
  default     = true
}

variable "loki" {
  description = "Local Loki: {enabled, region, replication_factor}. Required, as upstream: pass at least {}."
  type        = any
}

variable "loki_access_key_id" {
  description = "V1/V2 leftover."
  type        = string
  default     = null
}

variable "loki_secret_key" {
  description = "V1/V2 leftover."
  type        = string
  default     = null
  sensitive   = true
}

variable "loki_custom_replication_factor" {
  description = "V1/V2 leftover."
  type        = number
  default     = null
}

# --- applications (accepted, not simulated) ------------------------------------------------------------------

variable "test_mode" {
  description = "Deploy the NCCL test."
  type        = bool
  default     = false
}

variable "nccl_test_image" {
  description = "NCCL test image."
  type        = string
  default     = "cr.eu-north1.nebius.cloud/nebius-benchmarks/nccl-tests:2.19.4-ubu22.04-cu12.2"
}

variable "enable_kuberay_cluster" {
  description = "KubeRay operator plus a RayCluster."
  type        = bool
  default     = false
}

variable "enable_kuberay_service" {
  description = "KubeRay plus a RayService."
  type        = bool
  default     = false
}

variable "kuberay_cpu_cluster" {
  description = "npa-pulumi's CPU RayCluster: {worker_replicas, worker_cpus, worker_memory_gib}."
  type        = any
  default     = null
}

variable "kuberay_cpu_worker_image" {
  description = "KubeRay CPU worker image."
  type        = any
  default     = null
}

variable "kuberay_gpu_worker_image" {
  description = "KubeRay GPU worker image."
  type        = any
  default     = null
}

variable "kuberay_min_cpu_replicas" {
  description = "KubeRay CPU worker minimum."
  type        = number
  default     = 0
}

variable "kuberay_max_cpu_replicas" {
  description = "KubeRay CPU worker maximum."
  type        = number
  default     = 0
}

variable "kuberay_min_gpu_replicas" {
  description = "KubeRay GPU worker minimum."
  type        = number
  default     = 0
}

variable "kuberay_max_gpu_replicas" {
  description = "KubeRay GPU worker maximum."
  type        = number
  default     = 0
}

variable "kuberay_cpu_resources" {
  description = "KubeRay CPU worker resources {cpus, memory}."
  type        = any
  default     = null
}

variable "kuberay_gpu_resources" {
  description = "KubeRay GPU worker resources {cpus, gpus, memory}."
  type        = any
  default     = null
}

variable "kuberay_serve_config_v2" {
  description = "RayService serve config."
  type        = string
  default     = null
}

variable "kueue" {
  description = "Kueue (V3 only): {enabled, chart_version, namespace, timeout_seconds, topology_aware_scheduling, helm_values}."
  type        = any
  default     = { enabled = false }
}

variable "opa_gatekeeper_enable" {
  description = "OPA Gatekeeper (upstream V3/V4 name)."
  type        = bool
  default     = false
}

variable "enable_opa_gatekeeper" {
  description = "OPA Gatekeeper (the name npa-pulumi renders)."
  type        = bool
  default     = false
}

variable "k8s_rbac_bindings" {
  description = "Optional RBAC bindings."
  type        = any
  default     = {}
}

variable "binpacking_enable" {
  description = "A second, binpacking scheduler."
  type        = bool
  default     = false
}

variable "binpacking_kube_sched_ver" {
  description = "kube-scheduler version of the binpacking scheduler."
  type        = string
  default     = null
}

variable "binpacking_forced_namespaces" {
  description = "Namespaces where binpacking is forced."
  type        = list(string)
  default     = ["default"]
}
