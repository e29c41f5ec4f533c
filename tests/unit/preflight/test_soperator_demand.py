"""Preflight budgets a soperator target as the soperator recipe builds it: every node group of every role
and worker node set (in chunks), their boot disks, the shared filesystems, one GPU cluster per GPU worker
set and the VPC allocations — exact figures for a target with two worker sets."""

from __future__ import annotations

import json

from npa_pulumi.plan import Target, resolve_targets
from npa_pulumi.plan.soperator import node_groups, render_tfvars
from npa_pulumi.preflight.demand import GIB, compute_requirements
from npa_pulumi.preflight.soperator_demand import soperator_demand
from npa_pulumi.spec import parse_spec

REGION = "us-central1"
SPEC = {
    "apiVersion": "npa.fleet/v0.0.1",
    "name": "hpc",
    "region": REGION,
    "projects": [
        {
            "name": "p",
            "clusters": [
                {
                    "name": "slurm",
                    "backend": "soperator",
                    "soperator": {
                        "accounting": True,
                        "jail_size_gib": 2048,
                        "workers": [
                            {"name": "cpu", "platform": "cpu-d3", "preset": "16vcpu-64gb", "size": 2},
                            {
                                "name": "gpu",
                                "platform": "gpu-h200-sxm",
                                "preset": "8gpu-128vcpu-1600gb",
                                "size": 10,
                                "boot_disk_gib": 1024,
                                "fabric": "fabric-3",
                            },
                        ],
                    },
                }
            ],
        }
    ],
}


def _target() -> Target:
    [target] = resolve_targets(parse_spec(json.dumps(SPEC)))
    return target


def test_a_two_worker_set_target_needs_exactly_this() -> None:
    target = _target()
    amounts = {r.name: r.amount for r in compute_requirements([], soperators=[soperator_demand(target)])}
    # Nodes: system 3 + controller 1 + login 1 + accounting 1 + cpu workers 2 + gpu workers 10 = 18.
    assert amounts == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 2 * 18 + 1,  # two per node, plus the login's static IP
        "compute.instance.count": 18,
        "compute.instance.gpu.h200": 10 * 8,
        # 12 workers is sizing tier S: system 3×16 + controller 16 + login 16 + accounting 8, and cpu workers
        # 2×16 (GPU nodes never count here)
        "compute.instance.non-gpu.vcpu": 120,
        "compute.disk.count": 18,
        # system 3×128 + controller 128 + login 256 + accounting 128 + cpu 2×512 + gpu 10×1024
        "compute.disk.size.network-ssd": 12160 * GIB,
        "compute.gpucluster.count": 1,
        "compute.filesystem.count": 3,  # controller spool, jail, accounting
        "compute.filesystem.size.network-ssd": (128 + 2048 + 128) * GIB,
    }


def test_worker_sets_are_chunked_into_node_groups_as_the_recipe_names_them() -> None:
    target = _target()
    payload = target.cluster.soperator
    assert payload is not None
    groups = [(g.name, g.role, g.nodes) for g in node_groups(target.cluster_name, payload)]
    assert groups == [
        ("soperator-slurm-system", "system", 3),
        ("soperator-slurm-controller", "controller", 1),
        ("soperator-slurm-login", "login", 1),
        ("soperator-slurm-accounting", "accounting", 1),
        ("soperator-slurm-worker-cpu-0", "worker", 2),
        ("soperator-slurm-worker-gpu-0", "worker", 8),
        ("soperator-slurm-worker-gpu-1", "worker", 2),
    ]
    tfvars = render_tfvars(target.cluster_name, payload, ["ssh-ed25519 AAAA test"])
    assert tfvars["company_name"] == "slurm"
    assert tfvars["filestore_jail"] == {"spec": {"size_gibibytes": 2048, "block_size_kibibytes": 4}}
    gpu = tfvars["slurm_nodeset_workers"][1]
    assert gpu["nodes_per_nodegroup"] == 8 and gpu["gpu_cluster"] == {"infiniband_fabric": "fabric-3"}
    assert "gpu_cluster" not in tfvars["slurm_nodeset_workers"][0]
    # Identity is never rendered: the bridge passes it at run time.
    assert not {"iam_project_id", "iam_tenant_id", "vpc_subnet_id", "region"} & set(tfvars)


def test_an_unchanged_live_target_adds_nothing() -> None:
    assert compute_requirements([], soperators=[soperator_demand(_target(), unchanged=True)]) == []
