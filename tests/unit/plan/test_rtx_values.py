"""The RTX rendering profile's GPU Operator values (plan/rtx_values.py): exactly the requested pool,
zonal platforms included, RDMA off, the toolkit reading containerd's config file, the repositories through
`driver.repoConfig`; and a revision that is the SHA-256 of their canonical JSON, which changes with any
value or repository file and with nothing else."""

from __future__ import annotations

import hashlib
import json

from npa_pulumi.kube.gpu_operator import REPOSITORIES_CONFIGMAP
from npa_pulumi.plan.rtx_values import DriverPoolProfile, RtxOperatorValues, rtx_operator_values

SOURCES = {"ubuntu-noble.sources": "Types: deb\nURIs: https://mirror.example/ubuntu\nSuites: noble\n"}


def test_the_values_pin_exactly_the_requested_zonal_pool() -> None:
    values = rtx_operator_values("gpu-rtx6000-a", "8gpu-192vcpu-1744gb", SOURCES).helm_values()
    assert values == {
        "nebius": {
            "nvidiaDriverCRDPatch": {
                "profiles": [{"platform": "gpu-rtx6000-a", "preset": "8gpu-192vcpu-1744gb"}]
            }
        },
        "driver": {"rdma": {"enabled": False}, "repoConfig": {"configMapName": REPOSITORIES_CONFIGMAP}},
        "toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]},
    }


def test_without_repositories_the_image_keeps_its_own_sources() -> None:
    values = rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", {})
    assert "repoConfig" not in values.helm_values()["driver"]
    assert values.repositories == {}


def test_the_revision_is_the_sha256_of_the_canonical_json() -> None:
    values = rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", SOURCES)
    digest = hashlib.sha256(SOURCES["ubuntu-noble.sources"].encode()).hexdigest()
    document = {"values": values.helm_values(), "repositories": {"ubuntu-noble.sources": digest}}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    assert values.revision() == hashlib.sha256(canonical.encode()).hexdigest()


def test_the_revision_follows_every_value_and_file_and_nothing_else() -> None:
    base = rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", SOURCES).revision()
    assert base == rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", dict(SOURCES)).revision()
    two = {"b.sources": "deb b", "a.sources": "deb a"}
    assert (
        rtx_operator_values("p", "q", two).revision()
        == rtx_operator_values("p", "q", dict(sorted(two.items()))).revision()
    )
    changed = [
        rtx_operator_values("gpu-rtx6000-a", "1gpu-24vcpu-218gb", SOURCES),
        rtx_operator_values("gpu-rtx6000", "8gpu-192vcpu-1744gb", SOURCES),
        rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", {"ubuntu-noble.sources": "Types: deb\n"}),
        rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", {}),
        RtxOperatorValues(
            driver_profiles=(DriverPoolProfile(platform="gpu-rtx6000", preset="1gpu-24vcpu-218gb"),),
            toolkit_runtime_config_source="command",
        ),
    ]
    revisions = {v.revision() for v in changed}
    assert base not in revisions and len(revisions) == len(changed)


def test_the_values_never_hold_the_sources_themselves() -> None:
    values = rtx_operator_values("gpu-rtx6000", "1gpu-24vcpu-218gb", SOURCES)
    assert "mirror.example" not in values.model_dump_json()
    assert "mirror.example" not in json.dumps(values.helm_values())


FLEET = """\
apiVersion: npa.fleet/v0.0.1
name: render
region: us-central1
projects:
  - name: p
    clusters:
      - name: rtx
        gpu_nodes: {count: 1, platform: gpu-rtx6000-a, preset: 1gpu-24vcpu-218gb}
        gpu_workload_profile: rtx-rendering
        gpu_driver_package_repositories:
          ubuntu-noble.sources: "Types: deb\\nURIs: https://mirror.example/ubuntu\\nSuites: noble\\n"
      - name: plain
        gpu_nodes: {count: 1, platform: gpu-rtx6000-a, preset: 1gpu-24vcpu-218gb}
        gpu_workload_profile: rtx-rendering
"""


def test_the_gate_checks_the_repository_files_by_their_digests() -> None:
    from npa_pulumi.plan import resolve_targets
    from npa_pulumi.plan.gates import health_gate_config
    from npa_pulumi.spec import parse_spec

    clusters = {t.cluster_name: t.cluster for t in resolve_targets(parse_spec(FLEET))}
    config = health_gate_config(clusters["rtx"])
    assert config.driver_repo_configmap == REPOSITORIES_CONFIGMAP
    assert config.driver_repositories == {
        "ubuntu-noble.sources": hashlib.sha256(SOURCES["ubuntu-noble.sources"].encode()).hexdigest()
    }
    assert "mirror.example" not in json.dumps(
        config.to_inputs()
    )  # the gate's settings are kept in stack state
    plain = health_gate_config(clusters["plain"])
    assert "driver_repositories" not in plain.to_inputs()
