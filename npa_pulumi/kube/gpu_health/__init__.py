"""The GPU health gate: a cluster is `deployed` only once its GPUs are usable.

One run, bounded by a single deadline (`timeout_s`), every API call bounded by what is left of it:

1. **Snapshots** every `poll_s`: every requested node present and Ready with a boot id; exactly the
   expected GPU nodes, with the expected allocatable `nvidia.com/gpu` in total and capacity equal to it;
   no `NebiusGPUError` condition; on NVSwitch topologies the fabric state exposed as complete; the driver
   components of the driver mode (`nvidia-device-plugin` for managed-image, `gpu-operator` for operator)
   Running and ready, none on an older template than its DaemonSet's, every driver DaemonSet selecting
   exactly the GPU pool, and (RTX package repositories) every driver pod mounting exactly the configured
   repository files from the fleet's ConfigMap (kube/gpu_operator.py).
2. **Stabilization**: the first clean snapshot starts a timer, any error resets it; it passes once it has
   stayed clean for `stabilization_s`. The first snapshot with the whole topology fixes each node's boot
   id; a later one that differs (a node rebooted, added or replaced) fails at once.
3. **CUDA smoke** (when asked): a vectorAdd pod pinned to every GPU node, each under a unique name (a pod
   of an earlier attempt that is still terminating can never be mistaken for this one), judged by its
   phase and the output it leaves as its termination message, and always deleted with a UID precondition.
4. **MIG hardware** (MIG clusters, before the MIG smoke): a probe pod per GPU node runs `nvidia-smi`
   (`--query-gpu` and `-L`) through the driver and must list exactly the node's GPUs, each with MIG mode
   enabled (current and pending), the pinned driver, and exactly the pinned layout's MIG devices, all
   with distinct UUIDs across the cluster: the device plugin's advertised resources (checked by the
   snapshots) can outlive a GPU whose MIG mode was reset, and only the driver tells.

The result is evidence (per node: what held, what failed, when), which never holds anything secret.

The gate by concern: `config.py` (`GateConfig`, `Snapshot`, `Evidence`), `checks.py` (the snapshots),
`probes.py` (the CUDA, graphics and MIG hardware probe pods), `mig.py` (MIG readiness, the operator's
pinned release, the hardware report), `repair.py` (the repairs `--reconcile` makes: stale OnDelete driver
pods, the stale mig-not-ready taint, GFD and the device plugin), `gate.py` (`run_gate`). Import from the
module that owns a name.
"""
