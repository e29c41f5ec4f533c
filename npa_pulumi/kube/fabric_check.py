"""The fabric check: NCCL all-reduce bus bandwidth on every GPU node and across the InfiniBand fabric.

A cluster whose GPUs are all visible and run a CUDA kernel can still train at a fraction of its speed: one
node with a degraded NVLink/NVSwitch, or an InfiniBand port down, slows every collective to its slowest
link. After the GPU health gate passed (or on demand, `verify-fabric`), this check measures it:

1. **Intra-node**: a probe pod pinned to every GPU node (unique name, all the node's GPUs, the pinned
   nccl-tests image) runs `all_reduce_perf -b <min> -e <max> -f <factor> -g <gpus>`; the node passes when
   its `# Avg bus bandwidth` meets the intra-node threshold. All nodes run at once (each uses only its own
   GPUs and NVLink).
2. **Inter-node** (a GPU cluster on an InfiniBand fabric with two or more GPU nodes): one all-reduce over
   every GPU of every GPU node, with only Kubernetes primitives: one pod per node (pinned by `nodeName`,
   `hostname` `rank-<i>` under a headless Service, so rank 0 is `rank-0.<service>` for the rendezvous) runs
   the inter-node program (torchrun + NCCL, printing nccl-tests' table) with all its GPUs and the node's
   InfiniBand devices. Its bus bandwidth at the largest size must meet the inter-node threshold.
3. **Culprit search** when the inter-node figure is low, bounded by the same deadline (`bisect_culprits`):
   every node at once runs the program alone with NCCL's peer-to-peer and shared-memory transports off, so
   its ranks talk through its own InfiniBand ports (a loopback through the HCAs); a node below the
   threshold is named. When every node passes alone, the slow set is halved (each half at once, recursing
   into the slow half), and a slow pair is resolved against nodes a fast half proved good: the node whose
   link to the fabric is slow is named, in at most ceil(log2 N) + 1 rounds, every round's figures in the
   evidence.

Bare pods rather than an indexed Job: each rank must sit on a named node (a Job's pods share one template,
and a Job would retry a failed rank), and every probe is deleted with a UID precondition and proven gone,
as the gate's other probes are. Evidence never holds anything secret.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_health.config import SMOKE_LABEL, SMOKE_LABEL_VALUE
from npa_pulumi.kube.gpu_health.probes import delete_and_wait, terminated_state
from npa_pulumi.kube.gpu_health.repair import gpu_workloads
from npa_pulumi.kube.nccl_output import parse_all_reduce

JSON = dict[str, Any]
# The images, named here only. nccl-tests: the k8s-training recipe's own `nccl_test_image` default.
NCCL_TESTS_IMAGE = "cr.eu-north1.nebius.cloud/nebius-benchmarks/nccl-tests:2.19.4-ubu22.04-cu12.2"
# The inter-node program needs torch.distributed over NCCL (no MPI launcher: no MPI operator needed).
INTER_NODE_IMAGE = "nvcr.io/nvidia/pytorch:24.07-py3"
PROBE_KIND_LABEL = "npa.nebius.com/smoke"
INTRA_PROBE = "nccl-intra"
INTER_PROBE = "nccl-inter"
RUN_LABEL = "npa.nebius.com/fabric-run"
RANK_LABEL = "npa.nebius.com/fabric-rank"
RANKS_LABEL = "npa.nebius.com/fabric-ranks"
LOOPBACK_LABEL = "npa.nebius.com/fabric-loopback"
RENDEZVOUS_PORT = 29500
_CALL_CAP_S = 10.0


# The settings a plan sets (npa_pulumi/plan/gates.py): the fabric check's stored input.
PLANNED_FABRIC_SETTINGS = (
    "gpus_per_node",
    "expected_gpu_nodes",
    "intra_node",
    "inter_node",
    "intra_min_busbw_gbps",
    "inter_min_busbw_gbps",
    "threshold_source",
    "min_bytes",
    "max_bytes",
    "step_factor",
    "timeout_s",
    "not_applicable",
    "inter_not_applicable",
)


@dataclass(frozen=True)
class FabricConfig:
    """What to measure on one cluster and what it must reach (npa_pulumi/plan/gates.py builds it)."""

    gpus_per_node: int
    expected_gpu_nodes: int
    intra_node: bool
    inter_node: bool
    intra_min_busbw_gbps: float
    inter_min_busbw_gbps: float
    threshold_source: str = ""
    min_bytes: str = "512M"
    max_bytes: str = "8G"
    step_factor: int = 2
    timeout_s: float = 900.0
    namespace: str = "npa-system"
    nccl_tests_image: str = NCCL_TESTS_IMAGE
    inter_node_image: str = INTER_NODE_IMAGE
    not_applicable: str = ""  # why neither check applies ("" when one does)
    inter_not_applicable: str = ""  # why the inter-node check does not apply
    poll_s: float = 1.0

    def __post_init__(self) -> None:
        # Numbers cross the Pulumi engine as floats: counts go back to integers (`-g 8`, not `-g 8.0`).
        for name in ("gpus_per_node", "expected_gpu_nodes", "step_factor"):
            object.__setattr__(self, name, int(getattr(self, name)))

    def to_inputs(self) -> dict[str, Any]:
        """The settings as the fabric check's stored input (plain JSON in stack state): what a plan sets
        (PLANNED_FABRIC_SETTINGS); the rest keep their defaults, as stack state has always held them."""
        return {name: getattr(self, name) for name in PLANNED_FABRIC_SETTINGS}

    @classmethod
    def from_inputs(cls, stored: dict[str, Any]) -> FabricConfig:
        """The settings back from the stored input (as `to_inputs` wrote them)."""
        return cls(**stored)

    @property
    def benchmark_args(self) -> str:
        return f"-b {self.min_bytes} -e {self.max_bytes} -f {self.step_factor} -g {self.gpus_per_node}"


def _suffix(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:10]


def _labels(kind: str, run: str) -> dict[str, str]:
    return {SMOKE_LABEL: SMOKE_LABEL_VALUE, PROBE_KIND_LABEL: kind, RUN_LABEL: run}


def _gpu_container(name: str, image: str, script: str, gpus: int) -> JSON:
    return {
        "name": name,
        "image": image,
        "command": ["/bin/bash", "-c", script],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def _pod(name: str, namespace: str, labels: dict[str, str], node: str, container: JSON) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": node,
            "automountServiceAccountToken": False,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [container],
            # NCCL's shared-memory transport needs more than the container runtime's 64 MiB default.
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
    }


def intra_script(config: FabricConfig) -> str:
    binary = "$(command -v all_reduce_perf || echo /opt/nccl_tests/build/all_reduce_perf)"
    return (
        f'set -o pipefail; "{binary}" {config.benchmark_args} 2>&1 | tail -c 3800 '
        "| tee /dev/termination-log; exit ${PIPESTATUS[0]}"
    )


def intra_pod(config: FabricConfig, node: str, run: str) -> JSON:
    """`all_reduce_perf` over all of `node`'s GPUs (NVLink/NVSwitch); its output is the termination log."""
    name = f"npa-nccl-intra-{_suffix(node)}-{secrets.token_hex(3)}"
    container = _gpu_container(
        "all-reduce", config.nccl_tests_image, intra_script(config), config.gpus_per_node
    )
    return _pod(name, config.namespace, _labels(INTRA_PROBE, run), node, container)


# The inter-node program: torch.distributed over NCCL, printing nccl-tests' all_reduce_perf table (rank 0),
# out-of-place (a copy into a second buffer, then the all-reduce) and in-place, then the average.
INTER_NODE_PROGRAM = r"""
import os, sys, time, socket
import torch, torch.distributed as dist
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
def size(text):
    text = text.upper()
    unit = text[-1] if text[-1] in UNITS else ""
    return int(text[: len(text) - len(unit)]) * UNITS[unit]
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
lo, hi, factor = size(args["-b"]), size(args["-e"]), int(args["-f"])
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
say = print if rank == 0 else (lambda *a, **k: None)
say(f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: 5 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0")
say("#")
say("# Using devices")
where = [None] * world
dist.all_gather_object(where, (rank, os.getpid(), socket.gethostname(), local, torch.cuda.get_device_name()))
for r, pid, host, dev, product in where:
    say(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10} device {dev:2d} [0x00] {product}")
say("#")
GROUP = "     time   algbw   busbw #wrong"
UNITS_ROW = "    (us)  (GB/s)  (GB/s)       "
say("#" + " " * 62 + "out-of-place" + " " * 23 + "in-place")
say("#       size         count      type   redop    root" + GROUP + GROUP)
say("#        (B)    (elements)" + " " * 27 + UNITS_ROW + "     " + UNITS_ROW)
def timed(fn, iters=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(); dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6
def fmt(us):
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"
total, n, nbytes = 0.0, 0, lo
while nbytes <= hi:
    count = nbytes // 4
    src = torch.ones(count, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    check = torch.ones(count, dtype=torch.float32, device="cuda")
    dist.all_reduce(check)
    wrong = int((check != world).sum().item())
    row = f"{nbytes:12d}  {count:12d}     float     sum      -1"
    for fn in (lambda: (dst.copy_(src), dist.all_reduce(dst)), lambda: dist.all_reduce(src)):
        us = timed(fn)
        algbw = nbytes / us / 1e3
        busbw = algbw * 2 * (world - 1) / world
        total, n = total + busbw, n + 1
        row += f"  {fmt(us)}  {algbw:6.2f}  {busbw:6.2f}  {wrong:5d}"
    say(row)
    del src, dst, check
    nbytes *= factor
say("# Out of bounds values : 0 OK")
say(f"# Avg bus bandwidth    : {total / max(n, 1):.3f} ")
say("#")
dist.destroy_process_group()
"""


def _service_name(run: str) -> str:
    return f"npa-nccl-{run}"


def inter_script(config: FabricConfig, ranks: int, rank: int, service: str, loopback: bool) -> str:
    """torchrun of the inter-node program: `ranks` nodes, `rank` this one, rendezvous at rank 0."""
    master = "127.0.0.1" if loopback else f"rank-0.{service}.{config.namespace}.svc"
    tee = "tee /dev/termination-log" if rank == 0 else "tail -n 5 | tee /dev/termination-log"
    return (
        "set -o pipefail\ncat > /tmp/npa_all_reduce.py <<'NPA_PROGRAM'\n"
        f"{INTER_NODE_PROGRAM}\nNPA_PROGRAM\n"
        f"torchrun --nnodes {ranks} --node-rank {rank} --nproc-per-node {config.gpus_per_node} "
        f"--master-addr {master} --master-port {RENDEZVOUS_PORT} /tmp/npa_all_reduce.py "
        f"-b {config.min_bytes} -e {config.max_bytes} -f {config.step_factor} 2>&1 | tail -c 3800 | {tee}\n"
        "exit ${PIPESTATUS[0]}\n"
    )


def inter_pods(config: FabricConfig, nodes: list[str], run: str, loopback: bool = False) -> list[JSON]:
    """One pod per node of `nodes` (pinned, all GPUs, the node's InfiniBand devices). `loopback`: a single
    node whose ranks must talk through its own InfiniBand ports (NCCL's P2P and SHM transports off)."""
    service = _service_name(run)
    pods = []
    for rank, node in enumerate(nodes):
        script = inter_script(config, len(nodes), rank, service, loopback)
        container = _gpu_container("all-reduce", config.inter_node_image, script, config.gpus_per_node)
        container["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]  # RDMA pins memory
        container["volumeMounts"].append({"name": "infiniband", "mountPath": "/dev/infiniband"})
        env = [{"name": "NCCL_IB_HCA", "value": "mlx5"}, {"name": "NCCL_DEBUG", "value": "WARN"}]
        if loopback:
            env += [{"name": "NCCL_P2P_DISABLE", "value": "1"}, {"name": "NCCL_SHM_DISABLE", "value": "1"}]
        container["env"] = env
        container["ports"] = [{"containerPort": RENDEZVOUS_PORT, "name": "rendezvous"}]
        labels = {
            **_labels(INTER_PROBE, run),
            RANK_LABEL: str(rank),
            RANKS_LABEL: str(len(nodes)),
            **({LOOPBACK_LABEL: "true"} if loopback else {}),
        }
        pod = _pod(f"npa-nccl-inter-{run}-{rank}", config.namespace, labels, node, container)
        pod["spec"]["volumes"].append({"name": "infiniband", "hostPath": {"path": "/dev/infiniband"}})
        if not loopback:
            pod["spec"] |= {"hostname": f"rank-{rank}", "subdomain": service}
        pods.append(pod)
    return pods


def headless_service(config: FabricConfig, run: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": _service_name(run),
            "namespace": config.namespace,
            "labels": _labels(INTER_PROBE, run),
        },
        "spec": {
            "clusterIP": "None",
            "selector": {RUN_LABEL: run, PROBE_KIND_LABEL: INTER_PROBE},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}],
            "publishNotReadyAddresses": True,
        },
    }


def _new_run() -> str:
    return secrets.token_hex(4)


# ------------------------------------------------------------------------------------ running probes


@dataclass
class _Probe:
    pod: JSON
    uid: str = ""
    phase: str = "not-created"
    exit_code: Any = None
    output: str = ""
    error: str = ""
    cleaned_up: bool | None = None

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def node(self) -> str:
        return str(self.pod["spec"]["nodeName"])

    def summary(self) -> JSON:
        found: JSON = {"pod": self.name, "phase": self.phase, "exit_code": self.exit_code}
        found["cleaned_up"] = self.cleaned_up
        if self.error:
            found["error"] = self.error
        return found


def _run_probes(
    client: KubeClient, probes: list[_Probe], deadline: float, clock: Callable[[], float], poll_s: float
) -> None:
    """Create every probe pod, wait until each has ended (or one failed, or the deadline), then delete
    each by UID and wait until it is gone. Pods of an all-reduce wait for each other, so a failed rank
    ends the wait for all of them."""
    try:
        for probe in probes:
            namespace = probe.pod["metadata"]["namespace"]
            try:
                created = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", probe.pod)
                probe.uid, probe.phase = created["metadata"]["uid"], "Pending"
            except KubeError as err:
                probe.error = str(err)
        while clock() < deadline:
            for probe in probes:
                if not probe.uid or probe.phase in ("Succeeded", "Failed"):
                    continue
                try:
                    current = client.get(_pod_path(probe.pod))
                except KubeError as err:
                    probe.error = str(err)
                    continue
                probe.phase = (current.get("status") or {}).get("phase", "Pending")
                if probe.phase in ("Succeeded", "Failed"):
                    terminated = terminated_state(current)
                    probe.exit_code = terminated.get("exitCode")
                    probe.output = str(terminated.get("message") or "")
            pending = [p for p in probes if p.uid and p.phase not in ("Succeeded", "Failed")]
            if not pending or any(p.phase == "Failed" for p in probes):
                break
            time.sleep(min(poll_s, max(0.0, deadline - clock())))
        for probe in probes:
            if probe.uid and probe.phase not in ("Succeeded", "Failed"):
                probe.phase = "timeout"
    finally:
        for probe in probes:
            if probe.uid:
                probe.cleaned_up = delete_and_wait(client, _pod_path(probe.pod), probe.uid, deadline, clock)


def _pod_path(pod: JSON) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"


def _judge(probe: _Probe, floor: float, figure: str) -> JSON:
    """One benchmark's report: what it printed, parsed, against `floor` (`avg` or `largest` busbw)."""
    parsed = parse_all_reduce(probe.output)
    busbw = parsed.avg_busbw_gbps if figure == "avg" else parsed.largest_busbw_gbps
    errors = list(parsed.errors) if probe.phase in ("Succeeded", "Failed") else []
    if probe.phase != "Succeeded":
        errors.insert(0, f"the benchmark pod ended {probe.phase} (exit {probe.exit_code})")
    if probe.error:
        errors.append(probe.error)
    if probe.cleaned_up is False:
        errors.append(f"the benchmark pod {probe.name} could not be removed")
    passed = not errors and busbw is not None and busbw >= floor
    if busbw is not None and busbw < floor:
        errors.append(f"bus bandwidth {busbw:g} GB/s is below the {floor:g} GB/s threshold")
    return {
        "busbw_gbps": busbw,
        "threshold_gbps": floor,
        "passed": passed,
        "result": parsed.to_json(),
        **probe.summary(),
        "errors": errors,
    }


def run_intra_node(
    client: KubeClient, config: FabricConfig, nodes: list[str], deadline: float, clock: Callable[[], float]
) -> dict[str, JSON]:
    """`all_reduce_perf` on every node at once; each node's report (`busbw_gbps`: the average)."""
    run = _new_run()
    probes = [_Probe(intra_pod(config, node, run)) for node in sorted(nodes)]
    _run_probes(client, probes, deadline, clock, config.poll_s)
    return {p.node: _judge(p, config.intra_min_busbw_gbps, "avg") for p in probes}


def _run_inter_groups(
    client: KubeClient,
    config: FabricConfig,
    groups: list[list[str]],
    deadline: float,
    clock: Callable[[], float],
    loopback: bool = False,
) -> list[JSON]:
    """One all-reduce per group of nodes, all groups at once (they share no node)."""
    runs = [(_new_run(), group) for group in groups]
    services: list[tuple[str, str]] = []
    probes: list[list[_Probe]] = []
    try:
        for run, group in runs:
            if not loopback:
                service = headless_service(config, run)
                created = client.request("POST", f"/api/v1/namespaces/{config.namespace}/services", service)
                services.append((_service_path(config, run), created["metadata"]["uid"]))
            probes.append([_Probe(pod) for pod in inter_pods(config, group, run, loopback)])
        _run_probes(client, [p for group in probes for p in group], deadline, clock, config.poll_s)
    finally:
        removed = [delete_and_wait(client, path, uid, deadline, clock) for path, uid in services]
    reports = []
    for (_run, group), group_probes, gone in zip(runs, probes, removed or [True] * len(runs), strict=False):
        report = _judge(group_probes[0], config.inter_min_busbw_gbps, "largest")
        for other in group_probes[1:]:
            if other.phase != "Succeeded":
                report["errors"].append(f"rank on {other.node} ended {other.phase} (exit {other.exit_code})")
            if other.cleaned_up is False:
                report["errors"].append(f"the benchmark pod {other.name} could not be removed")
        if not gone:
            report["errors"].append("the rendezvous Service could not be removed")
        report["passed"] = report["passed"] and len(report["errors"]) == 0
        report["nodes"] = group
        report["pods"] = [p.name for p in group_probes]
        reports.append(report)
    return reports


def _service_path(config: FabricConfig, run: str) -> str:
    return f"/api/v1/namespaces/{config.namespace}/services/{_service_name(run)}"


Measure = Callable[[list[list[str]], bool], list[JSON]]  # (groups at once, loopback) -> one report each


def find_culprits(
    client: KubeClient, config: FabricConfig, nodes: list[str], deadline: float, clock: Callable[[], float]
) -> tuple[list[str], list[JSON]]:
    """The slow node(s) or link(s) of a failed inter-node all-reduce, and every round that found them
    (`bisect_culprits`), measured with the check's own pods."""

    def measure(groups: list[list[str]], loopback: bool) -> list[JSON]:
        return _run_inter_groups(client, config, groups, deadline, clock, loopback=loopback)

    return bisect_culprits(nodes, measure, lambda: clock() < deadline)


def bisect_culprits(
    nodes: list[str], measure: Measure, time_left: Callable[[], bool]
) -> tuple[list[str], list[JSON]]:
    """Bisection-based fault isolation over the nodes of a slow all-reduce, each round's groups measured at
    once (they share no node):

    1. every node alone over its own InfiniBand ports (a loopback): a node slow alone is named;
    2. the slow set halved, each half measured; the search recurses into each slow half; a slow set whose
       halves are both fast names the link between them;
    3. a slow pair is resolved against nodes a fast half proved good: each of the two with a good node; the
       one that stays slow is named (its link to the fabric), neither: the pair's link `x <-> y`.

    With one slow node or link among N nodes that is at most ceil(log2 N) + 1 rounds. Returns the culprits
    (node names, or `a <-> b` links) and every round's figures (`round`, `step`, nodes, busbw, passed)."""
    search: list[JSON] = []

    def run(groups: list[list[str]], loopback: bool, step: str) -> list[JSON]:
        reports = measure(groups, loopback)
        number = 1 + max((entry["round"] for entry in search), default=0)
        search.extend({"round": number, "step": step, **_brief(r)} for r in reports)
        return reports

    alone = run([[n] for n in nodes], True, "loopback")
    slow = sorted(r["nodes"][0] for r in alone if not r["passed"])
    if slow:
        return slow, search
    culprits: list[str] = []
    suspects: list[tuple[list[str], str]] = []  # (nodes to resolve, the link named if none is slow)
    good: list[str] = []
    frontier = [list(nodes)]
    while frontier and time_left():
        halves = {id(group): _halves(group) for group in frontier}
        runnable = [h for group in frontier for h in halves[id(group)] if len(h) >= 2]
        results = run(runnable, False, "halving") if runnable else []
        failed = [r["nodes"] for r in results if not r["passed"]]
        good += [n for r in results if r["passed"] for n in r["nodes"]]
        next_frontier: list[list[str]] = []
        for group in frontier:
            mine = [h for h in halves[id(group)] if h in failed]
            single = [h for h in halves[id(group)] if len(h) == 1]
            if not mine and single:  # the measurable half is fast: the odd node out is the suspect
                suspects.append((single[0], _link(halves[id(group)])))
            elif not mine:  # both halves are fast: the link between them
                culprits.append(_link(halves[id(group)]))
            for half in mine:
                if len(half) == 2:
                    suspects.append((half, " <-> ".join(half)))
                else:
                    next_frontier.append(half)
        frontier = next_frontier
    culprits += _resolve(suspects, good, run, time_left)
    return culprits, search


def _halves(group: list[str]) -> list[list[str]]:
    return [group[: len(group) // 2], group[len(group) // 2 :]]


def _link(halves: list[list[str]]) -> str:
    return " <-> ".join("+".join(half) for half in halves)


def _resolve(
    suspects: list[tuple[list[str], str]],
    good: list[str],
    run: Callable[[list[list[str]], bool, str], list[JSON]],
    time_left: Callable[[], bool],
) -> list[str]:
    """Each suspect measured with a node proved good, as many at once as there are good nodes: the ones
    that stay slow are named; a suspect set none of whose nodes is slow names its link."""
    queue = [node for nodes, _ in suspects for node in nodes] if good else []
    verdict: dict[str, bool] = {}
    while queue and time_left():
        batch, queue = queue[: len(good)], queue[len(good) :]
        for report in run([[node, peer] for node, peer in zip(batch, good, strict=False)], False, "pairing"):
            verdict[report["nodes"][0]] = bool(report["passed"])
    named = []
    for nodes, link in suspects:
        slow = [node for node in nodes if verdict.get(node) is False]
        named += slow or [link]
    return named


def _brief(report: JSON) -> JSON:
    return {k: report.get(k) for k in ("nodes", "busbw_gbps", "passed", "pods", "errors")}


# ------------------------------------------------------------------------------------ the check


def gpu_node_names(client: KubeClient) -> list[str]:
    """Nodes that carry GPUs (allocatable `nvidia.com/gpu`, or the GPU feature discovery's label)."""
    names = []
    for node in client.list("/api/v1/nodes"):
        labels = node["metadata"].get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        try:
            gpus = int(str(allocatable.get("nvidia.com/gpu", "0")))
        except ValueError:
            gpus = 0
        if gpus > 0 or labels.get("nvidia.com/gpu.present") == "true":
            names.append(node["metadata"]["name"])
    return sorted(names)


def not_applicable(config: FabricConfig) -> JSON:
    return {
        "status": "not-applicable",
        "passed": True,
        "reason": config.not_applicable,
        "thresholds": _thresholds(config),
    }


def _thresholds(config: FabricConfig) -> JSON:
    return {
        "intra_node_busbw_gbps": config.intra_min_busbw_gbps if config.intra_node else None,
        "inter_node_busbw_gbps": config.inter_min_busbw_gbps if config.inter_node else None,
        "source": config.threshold_source,
    }


def run_fabric_check(
    client_for: Callable[[float], KubeClient],
    config: FabricConfig,
    clock: Callable[[], float] = time.monotonic,
    refuse_while_busy: bool = False,
) -> JSON:
    """The whole check; the evidence (`status` passed | failed | not-applicable). `refuse_while_busy`
    (verify-fabric): fail at once, naming them, while pods other than the GPU operator's hold GPUs, since
    the benchmark needs every GPU of a node."""
    if config.not_applicable:
        return not_applicable(config)
    started = clock()
    deadline = started + config.timeout_s
    client = client_for(_CALL_CAP_S)
    evidence: JSON = {
        "status": "failed",
        "passed": False,
        "reason": "",
        "images": {
            "intra_node": config.nccl_tests_image if config.intra_node else None,
            "inter_node": config.inter_node_image if config.inter_node else None,
        },
        "benchmark": f"all_reduce_perf {config.benchmark_args}",
        "thresholds": _thresholds(config),
        "nodes": {},
        "inter_node": {"status": "not-applicable", "reason": config.inter_not_applicable},
        "slow_nodes": [],
    }

    def done(reason: str, slow: list[str] | None = None) -> JSON:
        evidence["slow_nodes"] = sorted(slow or [])
        evidence["passed"] = not reason
        evidence["status"] = "passed" if not reason else "failed"
        evidence["reason"] = reason or "fabric bandwidth at or above the thresholds"
        evidence["elapsed_s"] = round(clock() - started, 2)
        return evidence

    try:
        if refuse_while_busy:
            busy = gpu_workloads(client)
            if busy:
                return done(f"refused: pods hold the GPUs the benchmark needs: {', '.join(busy)}")
        nodes = gpu_node_names(client)
        if len(nodes) != config.expected_gpu_nodes:
            return done(f"{len(nodes)} GPU node(s) found, {config.expected_gpu_nodes} expected")
        if config.intra_node:
            evidence["nodes"] = run_intra_node(client, config, nodes, deadline, clock)
            slow = [n for n, r in evidence["nodes"].items() if not r["passed"]]
            if slow:
                if config.inter_node:  # a node known to be slow would only slow the all-reduce
                    evidence["inter_node"] = {"status": "not-run", "reason": "the intra-node check failed"}
                why = "; ".join(f"{n}: {(evidence['nodes'][n]['errors'] or ['failed'])[-1]}" for n in slow)
                return done(f"intra-node NCCL bandwidth too low on {', '.join(slow)} ({why})", slow)
        if config.inter_node and len(nodes) >= 2:
            report = _run_inter_groups(client, config, [nodes], deadline, clock)[0]
            evidence["inter_node"] = {"status": "passed" if report["passed"] else "failed", **report}
            if not report["passed"]:
                culprits, search = find_culprits(client, config, nodes, deadline, clock)
                rounds = max((entry["round"] for entry in search), default=0)
                evidence["inter_node"] |= {"culprits": culprits, "search": search, "rounds": rounds}
                figure = report["busbw_gbps"]
                shown = "no result" if figure is None else f"{figure:g} GB/s"
                named = ", ".join(culprits) or "not found before the deadline"
                return done(
                    f"inter-node NCCL bandwidth {shown} below {config.inter_min_busbw_gbps:g} GB/s; "
                    f"slow: {named}",
                    [c for c in culprits if " <-> " not in c],
                )
        elif config.inter_node:
            evidence["inter_node"] = {"status": "not-applicable", "reason": "fewer than two GPU nodes"}
    except KubeError as err:
        return done(f"the cluster's API failed the fabric check: {err}")
    return done("")
