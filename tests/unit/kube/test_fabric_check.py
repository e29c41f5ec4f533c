"""The fabric check: reading nccl-tests' `all_reduce_perf` output (text in the exact format it prints),
the probe pods, the thresholds and `gpu_fabric_check` in the spec, and the local cloud's model of NVLink
and InfiniBand (npa_pulumi/kube/fabric_check.py, npa_pulumi/simulator/kube/fabric.py)."""

from __future__ import annotations

from typing import Any

import pytest

from npa_pulumi.components.gpu_fabric import combine_with_gate
from npa_pulumi.kube.fabric_check import (
    INTER_PROBE,
    INTRA_PROBE,
    NCCL_TESTS_IMAGE,
    FabricConfig,
    headless_service,
    inter_pods,
    intra_pod,
    not_applicable,
)
from npa_pulumi.kube.nccl_output import parse_all_reduce, parse_size
from npa_pulumi.plan import resolve_targets
from npa_pulumi.plan.gates import fabric_check_config
from npa_pulumi.simulator.kube import fabric, shapes
from npa_pulumi.spec import SpecError, parse_spec

# nccl-tests 2.13 `all_reduce_perf -b 512M -e 8G -f 2 -g 8` on one 8x H100 SXM node, as it prints it.
H100_NODE = """\
# nThread 1 nGpus 8 minBytes 536870912 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41236 on gpu-node-0 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41236 on gpu-node-0 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41236 on gpu-node-0 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41236 on gpu-node-0 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  41236 on gpu-node-0 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  41236 on gpu-node-0 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  41236 on gpu-node-0 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  41236 on gpu-node-0 device  7 [0xdb] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
   536870912     134217728     float     sum      -1   2396.9  223.99  391.97      0   2390.2  224.61  393.07      0
  1073741824     268435456     float     sum      -1   4577.5  234.57  410.50      0   4569.8  234.96  411.19      0
  2147483648     536870912     float     sum      -1   8941.3  240.18  420.31      0   8930.0  240.48  420.84      0
  4294967296    1073741824     float     sum      -1    17702  242.63  424.60      0    17688  242.82  424.93      0
  8589934592    2147483648     float     sum      -1    35210  243.96  426.94      0    35187  244.12  427.21      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 415.156 
#
"""  # noqa: E501, W291

# A run that did not finish: NCCL found no InfiniBand device.
NO_IB = """\
# nThread 1 nGpus 1 minBytes 536870912 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
gpu-node-0:41236:41236 [0] NCCL WARN NET/IB : No device found.
gpu-node-0: Test NCCL failure common.cu:1005 'internal error - please report this issue to the NCCL developers'
 .. gpu-node-0 pid 41236: Test failure common.cu:891
"""  # noqa: E501


def test_real_all_reduce_perf_output_is_read_row_by_row() -> None:
    result = parse_all_reduce(H100_NODE)
    assert result.errors == []
    assert result.avg_busbw_gbps == 415.156
    assert result.ranks == 8 and result.hosts == ["gpu-node-0"]
    assert [r.size_bytes for r in result.rows] == [512 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30]
    largest = result.largest
    assert largest is not None and largest.count == 2147483648
    assert (largest.out_time_us, largest.out_algbw_gbps, largest.out_busbw_gbps) == (35210, 243.96, 426.94)
    assert (largest.in_time_us, largest.in_algbw_gbps, largest.in_busbw_gbps) == (35187, 244.12, 427.21)
    assert result.largest_busbw_gbps == 426.94 and result.wrong == 0 and result.out_of_bounds == 0


def test_columns_are_read_from_the_end_whatever_comes_before_and_without_validation() -> None:
    """Releases differ before the timing groups, and `#wrong` is N/A with `-c 0`."""
    row = "  8589934592    2147483648     float     sum   35210  243.96  426.94    N/A   35187  244.12  427.21    N/A"  # noqa: E501
    result = parse_all_reduce(row + "\n# Avg bus bandwidth    : 427.07\n")
    assert result.errors == []
    assert result.rows[0].out_busbw_gbps == 426.94 and result.rows[0].out_wrong is None


def test_a_failed_run_is_an_error_never_a_figure() -> None:
    result = parse_all_reduce(NO_IB)
    assert result.avg_busbw_gbps is None and result.rows == []
    assert any("Test NCCL failure" in e for e in result.errors)
    assert any("NCCL WARN NET/IB" in n for n in result.notices)  # the cause, said by NCCL: a notice
    assert "no '# Avg bus bandwidth' line (the benchmark did not finish)" in result.errors


# Line shapes from outputs people published (the figures are theirs; the lines around them are trimmed):
# `mpirun --tag-output` rows, tagged at each group (NVIDIA/nccl#1453); the 2019 layout without redop/root
# whose error column reads 0e+00 (NVIDIA/nccl-tests#44); Open MPI's boxed warnings (open-mpi/ompi#6517,
# NVIDIA/nccl#304) and NCCL's own WARN notices (NVIDIA/nccl-tests#82, #131) around a run that finished.
TAGGED_ROWS = """\
[0]      4194304       1048576     float     sum      -1[0]     622.6    6.74   12.91      0[0]     625.8    6.70   12.85      0
[0]      8388608       2097152     float     sum      -1[0]     992.6    8.45   16.20      0[0]     986.0    8.51   16.31      0
[1,0]<stdout>:# Out of bounds values : 0 OK
[1,0]<stdout>:# Avg bus bandwidth    : 14.5675
"""  # noqa: E501
OLD_LAYOUT = """\
    67108864       8388608   float   1568.3   21.40   21.40  0e+00   1560.9   21.50   21.50  0e+00
   134217728      16777216   float   3298.6   20.34   20.34  0e+00   3070.3   21.86   21.86  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 6.6
"""
NOTICES = """\
--------------------------------------------------------------------------
WARNING: There was an error initializing an OpenFabrics device.

  Local host:   c36a-s39
  Local device: mlx4_0
--------------------------------------------------------------------------
Authorization required, but no authorization protocol specified
v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
Meowth:8756:8772 [1] graph/search.cc:890 NCCL WARN Could not find a path for pattern 4, falling back to simple order
"""  # noqa: E501


def test_a_launchers_tags_are_not_part_of_a_row() -> None:
    result = parse_all_reduce(TAGGED_ROWS)
    assert result.errors == [] and result.avg_busbw_gbps == 14.5675
    assert [(r.size_bytes, r.out_busbw_gbps, r.in_busbw_gbps) for r in result.rows] == [
        (4194304, 12.91, 12.85),
        (8388608, 16.20, 16.31),
    ]


def test_the_older_layout_reads_from_the_end_with_its_float_error_column() -> None:
    result = parse_all_reduce(OLD_LAYOUT)
    assert result.errors == [] and result.largest_busbw_gbps == 20.34 and result.avg_busbw_gbps == 6.6
    assert result.rows[0].out_wrong is None  # 0e+00: not a count, so not read as one


def test_mpi_and_nccl_notices_never_fail_a_finished_run() -> None:
    result = parse_all_reduce(NOTICES + H100_NODE)
    assert result.errors == [] and result.avg_busbw_gbps == 415.156
    assert len(result.notices) == 4
    assert any("OpenFabrics" in n for n in result.notices)


def test_wrong_values_fail() -> None:
    broken = H100_NODE.replace("426.94      0", "426.94      3").replace("values : 0 OK", "values : 2 FAILED")
    result = parse_all_reduce(broken)
    assert "3 wrong value(s)" in result.errors and "2 out-of-bounds value(s)" in result.errors


def test_sizes() -> None:
    assert parse_size("512M") == 536870912 and parse_size("8G") == 8589934592 and parse_size("1024") == 1024
    with pytest.raises(ValueError):
        parse_size("8GB")


# ------------------------------------------------------------------------------------ probe pods


def _config(**overrides: Any) -> FabricConfig:
    settings: dict[str, Any] = {
        "gpus_per_node": 8,
        "expected_gpu_nodes": 2,
        "intra_node": True,
        "inter_node": True,
        "intra_min_busbw_gbps": 420.0,
        "inter_min_busbw_gbps": 360.0,
    }
    return FabricConfig(**{**settings, **overrides})


def test_the_intra_node_probe_uses_every_gpu_of_its_node_under_a_fresh_name() -> None:
    first, second = intra_pod(_config(), "n1", "run1"), intra_pod(_config(), "n1", "run1")
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["labels"]["npa.nebius.com/smoke"] == INTRA_PROBE
    assert first["spec"]["nodeName"] == "n1" and first["spec"]["restartPolicy"] == "Never"
    container = first["spec"]["containers"][0]
    assert container["image"] == NCCL_TESTS_IMAGE
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert (
        "all_reduce_perf" in container["command"][-1]
        and "-b 512M -e 8G -f 2 -g 8" in container["command"][-1]
    )
    assert "/dev/termination-log" in container["command"][-1]


def test_counts_that_crossed_the_engine_as_floats_are_integers_again() -> None:
    config = _config(gpus_per_node=8.0, expected_gpu_nodes=2.0, step_factor=2.0)
    assert config.benchmark_args == "-b 512M -e 8G -f 2 -g 8"
    assert (
        intra_pod(config, "n1", "r")["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    )


def test_inter_node_pods_rendezvous_through_a_headless_service() -> None:
    pods = inter_pods(_config(), ["n1", "n2"], "abc")
    assert [p["spec"]["nodeName"] for p in pods] == ["n1", "n2"]
    assert [p["spec"]["hostname"] for p in pods] == ["rank-0", "rank-1"]
    assert {p["spec"]["subdomain"] for p in pods} == {"npa-nccl-abc"}
    script = pods[1]["spec"]["containers"][0]["command"][-1]
    assert "--nnodes 2 --node-rank 1 --nproc-per-node 8" in script
    assert "--master-addr rank-0.npa-nccl-abc.npa-system.svc" in script
    assert all(p["metadata"]["labels"]["npa.nebius.com/smoke"] == INTER_PROBE for p in pods)
    service = headless_service(_config(), "abc")
    assert service["spec"]["clusterIP"] == "None" and service["metadata"]["name"] == "npa-nccl-abc"
    (alone,) = inter_pods(_config(), ["n1"], "def", loopback=True)
    env = {e["name"]: e["value"] for e in alone["spec"]["containers"][0]["env"]}
    assert env["NCCL_P2P_DISABLE"] == "1" and env["NCCL_SHM_DISABLE"] == "1"  # through its own IB ports
    assert "hostname" not in alone["spec"]


# ------------------------------------------------------------------------------------ spec and plan

FLEET = """\
apiVersion: npa.fleet/v0.0.1
name: fab
region: us-central1
projects:
  - name: p
    clusters:
      - name: train
        gpu_nodes: {count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        infiniband_fabric: fabric-local
        EXTRA
      - name: solo
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 1gpu-16vcpu-200gb}
"""


def _targets(extra: str = "") -> dict[str, Any]:
    spec = parse_spec(FLEET.replace("EXTRA", extra or "enable_filestore: false"))
    return {t.cluster_name: t.cluster for t in resolve_targets(spec)}


def test_an_8_gpu_h200_fabric_cluster_is_checked_at_the_table_thresholds() -> None:
    config = fabric_check_config(_targets()["train"])
    assert config.intra_node and config.inter_node and not config.not_applicable
    assert (config.intra_min_busbw_gbps, config.inter_min_busbw_gbps) == (420.0, 360.0)
    assert "soperator" in config.threshold_source
    assert (config.gpus_per_node, config.expected_gpu_nodes) == (8, 2)


def test_a_single_gpu_cluster_records_not_applicable() -> None:
    config = fabric_check_config(_targets()["solo"])
    assert not config.intra_node and not config.inter_node
    assert "no multi-GPU NVLink" in config.not_applicable
    record = not_applicable(config)
    assert record["status"] == "not-applicable" and record["reason"] == config.not_applicable


def test_the_spec_overrides_thresholds_and_sizes() -> None:
    block = (
        "gpu_fabric_check: {intra_node_min_busbw_gbps: 440, min_bytes: 1G, max_bytes: 4G, timeout_minutes: 5}"
    )
    config = fabric_check_config(_targets(block)["train"])
    assert config.intra_min_busbw_gbps == 440.0 and config.inter_min_busbw_gbps == 360.0
    assert (config.min_bytes, config.max_bytes, config.timeout_s) == ("1G", "4G", 300.0)
    assert "overridden in the spec: intra_node_min_busbw_gbps" in config.threshold_source
    disabled = fabric_check_config(_targets("gpu_fabric_check: {enabled: false}")["train"])
    assert disabled.not_applicable.startswith("disabled in the spec")


def test_the_check_stores_exactly_what_the_plan_sets() -> None:
    config = fabric_check_config(_targets()["train"])
    stored = config.to_inputs()  # the fabric check's input in stack state, as it has always been
    assert set(stored) == {
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
    }
    assert FabricConfig.from_inputs(stored) == config


def test_without_a_gpu_cluster_only_the_intra_node_check_runs() -> None:
    config = fabric_check_config(_targets("enable_gpu_cluster: false")["train"])
    assert config.intra_node and not config.inter_node
    assert "no InfiniBand GPU cluster" in config.inter_not_applicable


@pytest.mark.parametrize(
    ("block", "path", "words"),
    [
        ("{min_bytes: lots}", "gpu_fabric_check.min_bytes", "positive message size"),
        ("{min_bytes: 8G, max_bytes: 1G}", "gpu_fabric_check.max_bytes", ">= min_bytes"),
        ("{step_factor: 1}", "gpu_fabric_check.step_factor", ">= 2"),
        ("{inter_node_min_busbw_gbps: -1}", "gpu_fabric_check.inter_node_min_busbw_gbps", "negative"),
        ("{timeout_minutes: 90}", "gpu_fabric_check.timeout_minutes", "exceeds gpu_health_timeout_minutes"),
        ("{bandwidth: 1}", "gpu_fabric_check.bandwidth", "unknown field"),
    ],
)
def test_bad_fabric_check_settings_are_located(block: str, path: str, words: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec(FLEET.replace("EXTRA", f"gpu_fabric_check: {block}"))
    problems = [p for p in raised.value.problems if p.path == f"projects[0].clusters[0].{path}"]
    assert problems and words in problems[0].message and problems[0].line == 10, raised.value.problems


def test_enabling_it_on_a_single_gpu_preset_is_refused() -> None:
    text = FLEET.replace("EXTRA", "enable_filestore: false").replace(
        "preset: 1gpu-16vcpu-200gb}", "preset: 1gpu-16vcpu-200gb}\n        gpu_fabric_check: {enabled: true}"
    )
    with pytest.raises(SpecError) as raised:
        parse_spec(text)
    (problem,) = raised.value.problems
    assert problem.path == "projects[0].clusters[1].gpu_fabric_check.enabled"


# ------------------------------------------------------------------------------------ the local cloud

GROUP = {
    "id": "mk8snodegroup-e00fabricfabric01",
    "name": "gpu",
    "state": "RUNNING",
    "target_node_count": 2,
    "platform": "gpu-h200-sxm",
    "preset": "8gpu-128vcpu-1600gb",
    "gpu_cluster_id": "computegpucluster-e00fab",
}
NODES = shapes.node_names(GROUP)


def _local_intra(faults: dict[str, Any]) -> float | None:
    text = fabric.all_reduce_perf(
        [NODES[0]], 8, "NVIDIA H200", fabric.nvlink_busbw(GROUP, faults), 512 << 20, 8 << 30, 2
    )
    return parse_all_reduce(text).avg_busbw_gbps


def test_the_local_clouds_nodes_print_what_all_reduce_perf_prints() -> None:
    text = fabric.all_reduce_perf(NODES, 8, "NVIDIA H200", 395.0, 512 << 20, 8 << 30, 2)
    result = parse_all_reduce(text)
    assert result.errors == [] and result.ranks == 16 and result.hosts == sorted(NODES)
    assert len(result.rows) == 5
    for row in result.rows:  # busbw = algbw x 2(n-1)/n over 16 ranks
        assert row.out_busbw_gbps == pytest.approx(row.out_algbw_gbps * 2 * 15 / 16, abs=0.02)
    healthy, degraded = _local_intra({}), _local_intra({"nvlink_degraded": True})
    assert healthy is not None and healthy >= 420 and degraded is not None and degraded < 420 / 2


def test_infiniband_bandwidth_is_the_fabrics_and_drops_with_a_port_down() -> None:
    assert fabric.infiniband_busbw(GROUP, {}) == 395.0
    down = fabric.infiniband_busbw(GROUP, {"ib_port_down": True})
    assert down is not None and down < 360
    assert fabric.infiniband_busbw({**GROUP, "gpu_cluster_id": ""}, {}) is None  # no fabric: no IB


def test_the_cluster_takes_the_fabric_checks_state_and_reason() -> None:
    gate = {"passed": True, "phase": "done", "reason": "healthy"}
    slow = {"status": "failed", "reason": "intra-node NCCL bandwidth too low on n1"}
    lifecycle, evidence = combine_with_gate(["deployed", gate, "deployed-validation-failed", slow])
    assert lifecycle == "deployed-validation-failed"
    assert evidence["passed"] is False and evidence["phase"] == "fabric" and "n1" in evidence["reason"]
    skipped = {"status": "skipped", "reason": "the GPU health gate did not pass"}
    failed_gate = {"passed": False, "reason": "smoke"}
    lifecycle, evidence = combine_with_gate(["deployed-validation-failed", failed_gate, "", skipped])
    assert lifecycle == "deployed-validation-failed" and evidence["reason"] == "smoke"
    assert evidence["fabric"] == skipped


def test_the_inter_node_program_prints_what_the_parser_reads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The torchrun program the inter-node pods run, over a stand-in of torch.distributed (2 nodes x 8
    GPUs, every all-reduce of a buffer of ones giving the world size): nccl-tests' table, read back."""
    import sys
    import types

    from npa_pulumi.kube.fabric_check import INTER_NODE_PROGRAM

    world = 16

    class Tensor:
        def __init__(self, count: int, value: float = 1.0) -> None:
            self.count, self.value = count, value

        def copy_(self, other: Tensor) -> Tensor:
            self.value = other.value
            return self

        def __ne__(self, other: object) -> Any:
            return types.SimpleNamespace(sum=lambda: types.SimpleNamespace(item=lambda: 0))

    def all_reduce(tensor: Tensor) -> None:
        tensor.value = float(world)

    dist = types.SimpleNamespace(
        init_process_group=lambda backend: None,
        get_rank=lambda: 0,
        get_world_size=lambda: world,
        all_gather_object=lambda out, item: out.__setitem__(slice(None), [item] * len(out)),
        all_reduce=all_reduce,
        barrier=lambda: None,
        destroy_process_group=lambda: None,
    )
    cuda = types.SimpleNamespace(
        set_device=lambda d: None, get_device_name=lambda: "NVIDIA H200", synchronize=lambda: None
    )
    torch = types.ModuleType("torch")
    torch.__dict__.update(
        cuda=cuda,
        distributed=dist,
        float32="float32",
        ones=lambda count, dtype, device: Tensor(count),
        empty_like=lambda t: Tensor(t.count, 0.0),
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(sys, "argv", ["npa_all_reduce.py", "-b", "512M", "-e", "2G", "-f", "2"])
    exec(compile(INTER_NODE_PROGRAM, "npa_all_reduce.py", "exec"), {"__name__": "__main__"})
    result = parse_all_reduce(capsys.readouterr().out)
    assert result.errors == [] and result.ranks == world
    assert [r.size_bytes for r in result.rows] == [512 << 20, 1 << 30, 2 << 30]
    assert result.avg_busbw_gbps is not None and result.avg_busbw_gbps > 0
    row = result.rows[0]
    assert row.out_busbw_gbps == pytest.approx(row.out_algbw_gbps * 2 * 15 / 16, rel=0.01)


# ------------------------------------------------------------------------------------- bisection

import math  # noqa: E402

import pytest  # noqa: E402

from npa_pulumi.kube.fabric_check import bisect_culprits  # noqa: E402


def _fabric(slow_node: str = "", slow_link: str = "", pair_link: tuple[str, str] | None = None) -> Any:
    """A measure over a modelled fabric: a slow node is slow in every run it takes part in (its loopback
    too), a slow link only between it and another node, a slow pair link only when both are in a run."""
    rounds: list[list[list[str]]] = []

    def measure(groups: list[list[str]], loopback: bool) -> list[dict[str, Any]]:
        rounds.append(groups)
        reports = []
        for group in groups:
            slow = slow_node in group or (slow_link in group and len(group) > 1)
            slow = slow or (pair_link is not None and set(pair_link) <= set(group))
            reports.append({"nodes": group, "passed": not slow, "busbw_gbps": 150.0 if slow else 380.0})
        return reports

    measure.rounds = rounds  # type: ignore[attr-defined]
    return measure


FABRIC_NODES = [f"gpu-{i:02d}" for i in range(16)]


def test_a_slow_node_is_named_by_its_loopback_in_one_round() -> None:
    measure = _fabric(slow_node="gpu-05")
    culprits, search = bisect_culprits(FABRIC_NODES, measure, lambda: True)
    assert culprits == ["gpu-05"] and {e["round"] for e in search} == {1}
    assert len(measure.rounds) == 1 and all(len(g) == 1 for g in measure.rounds[0])


@pytest.mark.parametrize("count", [2, 3, 4, 5, 8, 16])
def test_a_slow_link_is_named_in_at_most_log2_n_plus_one_rounds(count: int) -> None:
    nodes = FABRIC_NODES[:count]
    for culprit in nodes:
        measure = _fabric(slow_link=culprit)
        culprits, search = bisect_culprits(nodes, measure, lambda: True)
        rounds = max(e["round"] for e in search)
        assert rounds <= math.ceil(math.log2(count)) + 1, (count, culprit, rounds)
        if count >= 4:
            assert culprits == [culprit], (count, culprit, culprits)
        else:  # too few nodes to prove one of them good: the link is named
            assert len(culprits) == 1 and culprit in culprits[0], culprits
        for groups in measure.rounds:  # every round's groups share no node
            flat = [n for g in groups for n in g]
            assert len(flat) == len(set(flat))
        assert all({"round", "step", "nodes", "busbw_gbps", "passed"} <= set(e) for e in search)


def test_a_slow_link_between_two_nodes_is_named_as_that_link() -> None:
    culprits, _ = bisect_culprits(FABRIC_NODES[:8], _fabric(pair_link=("gpu-02", "gpu-03")), lambda: True)
    assert culprits == ["gpu-02 <-> gpu-03"]


def test_the_search_stops_at_the_deadline() -> None:
    culprits, search = bisect_culprits(FABRIC_NODES, _fabric(slow_link="gpu-09"), lambda: False)
    assert culprits == [] and {e["step"] for e in search} == {"loopback"}
