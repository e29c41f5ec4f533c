"""The GPU fabric inside a local cluster: what NCCL's all-reduce measures on its nodes.

No GPU or InfiniBand exists in a local cluster, so the cluster's agent answers the fabric check's probe
pods (npa_pulumi/kube/fabric_check.py) from its model of the nodes, printing what nccl-tests'
`all_reduce_perf` (and the inter-node program, which prints the same table) would print there:

* each GPU node of a multi-GPU SXM/NVL preset has an NVLink/NVSwitch all-reduce bus bandwidth from its GPU
  (`NVLINK_BUSBW_GBPS`), a quarter of it under the `nvlink_degraded` fault;
* each InfiniBand fabric (node groups with a GPU cluster) has a per-node bus bandwidth from the platform
  (`INFINIBAND_BUSBW_GBPS`): an all-reduce across nodes gets the slowest participant's figure, and any
  all-reduce that goes through a node with the `ib_port_down` fault gets 40 % of it, one between a node with
  the `ib_link_degraded` fault and another node half of it (its loopback is not slowed); a node without a GPU
  cluster has no InfiniBand (the run fails as NCCL would, finding no IB device);
* bandwidth grows with message size as a real bus does (`peak x s / (s + 48 MiB)`).

The sizes, the GPUs and the ranks come from the probe's own command line and labels. An intra-node probe
finishes at once; the ranks of an inter-node run finish together once every rank is running (they wait
for each other at the rendezvous). The output becomes the termination message, as `tee
/dev/termination-log` leaves it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from npa_pulumi.simulator.kube import kubelet, shapes

JSON = dict[str, Any]
KIND_LABEL = "npa.nebius.com/smoke"
RUN_LABEL = "npa.nebius.com/fabric-run"
RANK_LABEL = "npa.nebius.com/fabric-rank"
RANKS_LABEL = "npa.nebius.com/fabric-ranks"
PROBE_KINDS = ("nccl-intra", "nccl-inter")
# Peak all-reduce bus bandwidth inside one 8-GPU node (GB/s): published 460-480 for 8x H100 SXM5 over
# NVLink; Blackwell's NVLink 5 doubles the link rate.
NVLINK_BUSBW_GBPS = {"h100": 470.0, "h200": 470.0, "b200": 780.0, "b300": 780.0}
# Across nodes, one 400 Gb/s NDR port per GPU (~50 GB/s per GPU): published 400-450 GB/s.
INFINIBAND_BUSBW_GBPS = {"h100": 395.0, "h200": 395.0, "b200": 395.0, "b300": 760.0}
NVLINK_DEGRADED = 0.25
IB_PORT_DOWN = 0.40
# A slow link between the node and the fabric (a bad cable or switch port): only traffic to other nodes
# crosses it, so the node's loopback through its own ports is not slowed.
IB_LINK_DEGRADED = 0.50
_HALF_SIZE = 48 << 20
_ARGS = re.compile(r"-b\s+(\d+[KMG]?)\s+-e\s+(\d+[KMG]?)\s+-f\s+(\d+)(?:\s+-g\s+(\d+))?")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# nccl-tests' column header (common.cu), out-of-place then in-place.
HEADER_GROUPS = "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10
HEADER_COLUMNS = (
    "#       size         count      type   redop    root" + "     time   algbw   busbw #wrong" * 2
)
HEADER_UNITS = (
    "#        (B)    (elements)"
    + " " * 31
    + "(us)  (GB/s)  (GB/s)       "
    + " " * 5
    + "(us)  (GB/s)  (GB/s)       "
)
NO_IB = "NCCL WARN NET/IB : No device found.\nTest NCCL failure common.cu:1005 'internal error'\n"


def _bytes(text: str) -> int:
    unit = text[-1] if text[-1] in "KMG" else ""
    return int(text[: len(text) - len(unit)]) * _UNITS[unit]


def _family(platform: str) -> str:
    found = re.match(r"gpu-([a-z0-9]+?)(?:-sxm|-pcie|-nvl|-[a-z])*$", platform.lower())
    return found.group(1) if found else ""


def nvlink_busbw(group: JSON, faults: JSON) -> float:
    gpus = shapes.preset_shape(group.get("preset") or "")[0]
    platform = str(group.get("platform", "")).lower()
    if gpus < 2 or not ("-sxm" in platform or "-nvl" in platform):
        return 20.0  # PCIe between GPUs
    peak = NVLINK_BUSBW_GBPS.get(_family(platform), 400.0)
    return peak * (NVLINK_DEGRADED if faults.get("nvlink_degraded") else 1.0)


def infiniband_busbw(group: JSON, faults: JSON) -> float | None:
    if not group.get("gpu_cluster_id"):
        return None
    peak = INFINIBAND_BUSBW_GBPS.get(_family(str(group.get("platform", ""))), 395.0)
    return peak * (IB_PORT_DOWN if faults.get("ib_port_down") else 1.0)


def _format_time(us: float) -> str:
    if us >= 10000:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def all_reduce_perf(
    hosts: list[str], gpus: int, product: str, peak_busbw: float, lo: int, hi: int, factor: int
) -> str:
    """The text nccl-tests' `all_reduce_perf` prints for one run over `hosts` x `gpus` ranks."""
    ranks = len(hosts) * gpus
    lines = [
        f"# nThread 1 nGpus {gpus if len(hosts) == 1 else 1} minBytes {lo} maxBytes {hi} "
        f"step: {factor}(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(ranks):
        host, device = hosts[rank // gpus], rank % gpus
        bus = f"0x{0x18 + 0x11 * device:02x}"
        pid = 1000 + rank // gpus
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host} device {device:2d} [{bus}] {product}"
        )
    lines += ["#", HEADER_GROUPS, HEADER_COLUMNS, HEADER_UNITS]
    total, count, size = 0.0, 0, lo
    while size <= hi:
        row = f"{size:12d}  {size // 4:12d}     float     sum      -1"
        for efficiency in (0.995, 1.0):  # in-place saves the copy
            busbw = peak_busbw * efficiency * size / (size + _HALF_SIZE)
            algbw = busbw * ranks / (2 * (ranks - 1)) if ranks > 1 else busbw
            us = size / (algbw * 1e3)
            total, count = total + round(busbw, 2), count + 1
            row += f"  {_format_time(us)}  {algbw:6.2f}  {busbw:6.2f}  {0:5d}"
        lines.append(row)
        size *= max(2, factor)
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / max(1, count):.6g} ",
        "#",
    ]
    return "\n".join(lines) + "\n"


class FabricModel:
    """The node's NVLink and InfiniBand, for the fabric check's probes."""

    def answer_probes(self, client: Any, cluster: JSON, groups: list[JSON]) -> None:
        group_of = {
            name: group
            for group in groups
            if group.get("state") == "RUNNING"
            for name in shapes.current_node_names(cluster, group)  # a replaced node's newcomer too
        }
        faults = cluster.get("node_faults") or {}
        runs: dict[str, list[JSON]] = defaultdict(list)
        for kind in PROBE_KINDS:
            for pod in kubelet.running_probes(client, f"{KIND_LABEL}={kind}"):
                if kind == "nccl-intra":
                    self._intra(client, pod, group_of, faults)
                else:
                    runs[pod["metadata"]["labels"].get(RUN_LABEL, "")].append(pod)
        for pods in runs.values():
            self._inter(client, pods, group_of, faults)

    @staticmethod
    def _args(pod: JSON) -> tuple[int, int, int, int] | None:
        container = pod["spec"]["containers"][0]
        found = _ARGS.search(" ".join(container.get("command") or []))
        if not found:
            return None
        gpus = int(found.group(4) or 0)
        return _bytes(found.group(1)), _bytes(found.group(2)), int(found.group(3)), gpus

    def _intra(self, client: Any, pod: JSON, group_of: dict[str, JSON], faults: JSON) -> None:
        node = pod["spec"].get("nodeName", "")
        container = pod["spec"]["containers"][0]
        group, args = group_of.get(node), self._args(pod)
        gpus = shapes.preset_shape((group or {}).get("preset") or "")[0]
        if group is None or not gpus or args is None:
            kubelet.finish(
                client, pod, container, 1, "Test CUDA failure common.cu:891 'no CUDA-capable device'\n"
            )
            return
        lo, hi, factor, wanted = args
        if wanted > gpus:
            kubelet.finish(client, pod, container, 1, f"Test CUDA failure: invalid device ordinal {gpus}\n")
            return
        product = shapes.gpu_product(group["platform"]).replace("-", " ")
        peak = nvlink_busbw(group, faults.get(node) or {})
        output = all_reduce_perf([node], wanted, product, peak, lo, hi, factor)
        kubelet.finish(client, pod, container, 0, output)

    def _inter(self, client: Any, pods: list[JSON], group_of: dict[str, JSON], faults: JSON) -> None:
        ranks = int(pods[0]["metadata"]["labels"].get(RANKS_LABEL, "0") or 0)
        if len({p["metadata"]["labels"].get(RANK_LABEL) for p in pods}) < ranks:
            return  # the others have not reached the rendezvous yet
        ordered = sorted(pods, key=lambda p: int(p["metadata"]["labels"].get(RANK_LABEL, "0")))
        nodes = [p["spec"].get("nodeName", "") for p in ordered]
        groups = [group_of.get(n) for n in nodes]
        figures: list[float] = []
        across = len(set(nodes)) > 1  # a loopback run never leaves its node's ports
        for node, group in zip(nodes, groups, strict=True):
            mine = faults.get(node) or {}
            ib = None if group is None else infiniband_busbw(group, mine)
            if ib is None:
                figures = []
                break
            if across and mine.get("ib_link_degraded"):
                ib *= IB_LINK_DEGRADED
            figures.append(min(ib, nvlink_busbw(group or {}, mine)))
        args = self._args(ordered[0])
        if not figures or args is None:
            for pod in ordered:
                kubelet.finish(client, pod, pod["spec"]["containers"][0], 1, NO_IB)
            return
        lo, hi, factor, _ = args
        first = groups[0] or {}
        gpus = shapes.preset_shape(first.get("preset") or "")[0]
        product = shapes.gpu_product(first["platform"]).replace("-", " ")
        output = all_reduce_perf(nodes, gpus, product, min(figures), lo, hi, factor)
        for rank, pod in enumerate(ordered):
            message = output if rank == 0 else output.splitlines()[-2] + "\n"
            kubelet.finish(client, pod, pod["spec"]["containers"][0], 0, message)
