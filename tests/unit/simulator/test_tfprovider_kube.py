"""The local kubernetes, kubectl and helm providers' handlers against a local cluster's real Kubernetes
API server: the provider block upstream k8s-training writes (the cluster's bare public endpoint, its CA
and the local IAM token), which the API server authenticates, and the objects they leave in the API as
seen with the cluster's administrator credentials."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.simulator import LocalCloud, LocalSimulator
from npa_pulumi.simulator.kube import controlplane
from npa_pulumi.simulator.tfproviders import helm, kubectl, kubernetes
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError

pytestmark = pytest.mark.integration  # a real kube-apiserver: the toolchain `make tools` builds

UPSTREAM = Path(__file__).resolve().parents[4] / "shared" / "upstream" / "nebius-solutions-library"
K8S = kubernetes.HANDLERS.resources


def _cluster(home: Path) -> tuple[LocalSimulator, str, dict[str, Any]]:
    """A local cluster with its API server up, and the provider block upstream's provider.tf writes."""
    sim = LocalSimulator()
    tenant = sim.principal()["tenant_id"]
    project = sim.list_projects(tenant)[0]["id"]
    subnet = sim.list_subnets(project)[0]["id"]
    cluster_id = sim.create_cluster(project, "tf", subnet)["id"]
    credentials = sim.get_cluster_credentials(cluster_id)
    config = {
        "host": credentials["server"].removeprefix(
            "https://"
        ),  # status.control_plane.endpoints.public_endpoint
        "cluster_ca_certificate": credentials["ca_pem"],
        "token": LocalCloud().access_token().get_secret_value(),  # var.iam_token
    }
    return sim, cluster_id, config


def _admin(home: Path, cluster_id: str) -> Any:
    access = controlplane.read_access(home / ".npa-pulumi" / "local-cloud", cluster_id)
    assert access is not None
    return access.client()


def _meta(**given: Any) -> list[dict[str, Any]]:
    keys = (
        "name",
        "namespace",
        "labels",
        "annotations",
        "generate_name",
        "uid",
        "resource_version",
        "generation",
    )
    return [{k: given.get(k) for k in keys}]


def test_kubernetes_types_act_on_the_api_with_the_iam_token(kube_api: Path) -> None:
    _sim, cluster_id, config = _cluster(kube_api)
    admin = _admin(kube_api, cluster_id)
    ctx = CallContext(provider_config=config)

    # The API server checks the token: another one is refused there.
    wrong = CallContext(provider_config={**config, "token": "npa-local-iam-token.someone-else"})
    with pytest.raises(ProviderError) as raised:
        K8S["kubernetes_namespace_v1"].create(wrong, {"metadata": _meta(name="nope")})
    assert "Unauthorized" in raised.value.summary
    assert admin.get_or_none("/api/v1/namespaces/nope") is None

    # k8s-rbac-bindings: a namespace, then mig.tf's service account, cluster role and binding.
    namespace = K8S["kubernetes_namespace_v1"].create(
        ctx, {"metadata": _meta(name="team-a", labels={"t": "a"})}
    )
    assert namespace["id"] == "team-a" and namespace["metadata"][0]["uid"]
    assert admin.get("/api/v1/namespaces/team-a")["metadata"]["labels"]["t"] == "a"
    account = K8S["kubernetes_service_account_v1"].create(
        ctx, {"metadata": _meta(name="mig-config-reconciler", namespace="kube-system")}
    )
    assert account["id"] == "kube-system/mig-config-reconciler"
    assert account["automount_service_account_token"] is True
    role = K8S["kubernetes_cluster_role_v1"].create(
        ctx,
        {
            "metadata": _meta(name="mig-config-reconciler"),
            "rule": [
                {
                    "api_groups": [""],
                    "resources": ["nodes"],
                    "verbs": ["get", "list", "patch", "watch"],
                    "non_resource_urls": None,
                    "resource_names": None,
                }
            ],
        },
    )
    live_role = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/mig-config-reconciler")
    assert live_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch", "watch"]}
    ]
    subject = {
        "kind": "ServiceAccount",
        "name": "mig-config-reconciler",
        "namespace": "kube-system",
        "api_group": None,
    }
    binding = K8S["kubernetes_cluster_role_binding_v1"].create(
        ctx,
        {
            "metadata": _meta(name="mig-config-reconciler"),
            "role_ref": [
                {
                    "api_group": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"][0]["name"],
                }
            ],
            "subject": [subject],
        },
    )
    assert binding["subject"][0]["api_group"] == ""
    live = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/mig-config-reconciler")
    assert live["subjects"] == [
        {"kind": "ServiceAccount", "name": "mig-config-reconciler", "namespace": "kube-system"}
    ]
    user = {"kind": "User", "name": "alice", "namespace": None, "api_group": None}
    role_binding = K8S["kubernetes_role_binding_v1"].create(
        ctx,
        {
            "metadata": _meta(name="view", namespace="team-a"),
            "role_ref": [{"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}],
            "subject": [user],
        },
    )
    assert (
        role_binding["id"] == "team-a/view"
        and role_binding["subject"][0]["api_group"] == "rbac.authorization.k8s.io"
    )

    # An update replaces the labels Terraform owns; read sees a deletion made by someone else.
    updated = K8S["kubernetes_namespace_v1"].update(
        ctx, {**namespace, "metadata": _meta(name="team-a", labels={"t": "b"})}, namespace
    )
    assert admin.get("/api/v1/namespaces/team-a")["metadata"]["labels"]["t"] == "b"
    assert updated["metadata"][0]["labels"] == {"t": "b"}
    assert K8S["kubernetes_role_binding_v1"].read(ctx, role_binding) is not None
    admin.delete("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/view")
    assert K8S["kubernetes_role_binding_v1"].read(ctx, role_binding) is None
    imported = K8S["kubernetes_cluster_role_v1"].import_(ctx, "mig-config-reconciler")
    assert imported["rule"][0]["verbs"] == ["get", "list", "patch", "watch"]

    # A Job: wait_for_completion waits within timeouts.create and says what it waited for.
    job = {
        "metadata": _meta(name="mig-config-reconciler-1", namespace="kube-system"),
        "spec": [
            {
                "backoff_limit": 0,
                "active_deadline_seconds": 960,
                "template": [
                    {
                        "metadata": [{}],
                        "spec": [
                            {
                                "service_account_name": "mig-config-reconciler",
                                "restart_policy": "Never",
                                "container": [
                                    {
                                        "name": "wait",
                                        "image": "registry.k8s.io/kubectl:v1.34.0",
                                        "command": ["kubectl"],
                                        "security_context": [{"run_as_user": "0"}],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
        "wait_for_completion": True,
        "timeouts": {"create": "3s", "update": None, "delete": None},
    }
    with pytest.raises(ProviderError) as raised:
        K8S["kubernetes_job_v1"].create(ctx, job)
    assert "did not complete in 3s" in raised.value.summary
    path = "/apis/batch/v1/namespaces/kube-system/jobs/mig-config-reconciler-1"
    live_job = admin.get(path)
    container = live_job["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {"runAsUser": 0} and live_job["spec"]["backoffLimit"] == 0
    admin.delete(path, grace_s=None)
    # The API server labels the Job for its generated selector; those labels stay out of state (as the
    # real provider leaves them out), else the apply is "inconsistent" with a plan of no labels.
    job["metadata"] = _meta(name="mig-config-reconciler-2", namespace="kube-system")
    job["wait_for_completion"] = False
    created = K8S["kubernetes_job_v1"].create(ctx, job)
    live_labels = admin.get(f"{path[:-2]}-2")["metadata"]["labels"]
    assert "batch.kubernetes.io/controller-uid" in live_labels
    assert created["metadata"][0]["labels"] is None
    refreshed = K8S["kubernetes_job_v1"].read(ctx, created)
    assert refreshed is not None and refreshed["metadata"][0]["labels"] is None
    admin.delete(f"{path[:-2]}-2", grace_s=None)

    # kubernetes_annotations and kubernetes_config_map_v1_data patch objects that exist.
    admin.create(
        "/api/v1/namespaces/kube-system/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cilium-config"},
            "data": {"keep": "me"},
        },
    )
    data = K8S["kubernetes_config_map_v1_data"].create(
        ctx,
        {
            "metadata": [{"name": "cilium-config", "namespace": "kube-system"}],
            "data": {"enable-ipv4-egress-gateway": "true"},
            "force": None,
            "field_manager": None,
        },
    )
    assert admin.get("/api/v1/namespaces/kube-system/configmaps/cilium-config")["data"] == {
        "keep": "me",
        "enable-ipv4-egress-gateway": "true",
    }
    K8S["kubernetes_config_map_v1_data"].delete(ctx, data)
    assert admin.get("/api/v1/namespaces/kube-system/configmaps/cilium-config")["data"] == {"keep": "me"}
    annotations = {
        "metadata": [{"name": "cilium-config", "namespace": "kube-system"}],
        "api_version": "v1",
        "kind": "ConfigMap",
        "annotations": {"restarted_for": "egress-gateway"},
        "template_annotations": None,
        "force": True,
        "field_manager": None,
    }
    state = K8S["kubernetes_annotations"].create(ctx, annotations)
    assert state["id"] == "apiVersion=v1,kind=ConfigMap,namespace=kube-system,name=cilium-config"
    live_cm = admin.get("/api/v1/namespaces/kube-system/configmaps/cilium-config")
    assert live_cm["metadata"]["annotations"]["restarted_for"] == "egress-gateway"
    missing = {**annotations, "metadata": [{"name": "grafana-and-prometheus", "namespace": "o11y"}]}
    with pytest.raises(ProviderError, match="does not exist"):
        K8S["kubernetes_annotations"].create(ctx, {**missing, "api_version": "apps/v1", "kind": "Deployment"})

    found = kubernetes.HANDLERS.data_sources["kubernetes_resource"].read_data(
        ctx,
        {
            "api_version": "v1",
            "kind": "ConfigMap",
            "metadata": [{"name": "cilium-config", "namespace": "kube-system"}],
        },
    )
    assert found["object"]["data"]["keep"] == "me"

    K8S["kubernetes_namespace_v1"].delete(ctx, updated)
    assert admin.get_or_none("/api/v1/namespaces/team-a") is None


def test_kubectl_applies_split_documents_server_side(kube_api: Path) -> None:
    _sim, cluster_id, config = _cluster(kube_api)
    admin = _admin(kube_api, cluster_id)
    ctx = CallContext(provider_config={**config, "load_config_file": False, "apply_retry_count": 5})
    # binpacking's scheduler manifests, rendered as the module renders them
    template = (UPSTREAM / "modules" / "binpacking" / "files" / "bp-scheduler.yaml.tftpl").read_text()
    content = template.replace("${kube_sched_ver}", "1.34.0")
    documents = kubectl.HANDLERS.data_sources["kubectl_file_documents"].read_data(ctx, {"content": content})
    assert len(documents["documents"]) >= 2 and len(documents["manifests"]) == len(documents["documents"])
    manifest = kubectl.HANDLERS.resources["kubectl_manifest"]
    applied = []
    for key, body in documents["manifests"].items():
        assert key.startswith(("/api/v1/", "/apis/"))
        planned = {
            "yaml_body": body,
            "wait_for_rollout": False,
            "field_manager": None,
            "override_namespace": None,
            "force_conflicts": None,
            "apply_only": None,
            "wait": True,
            "sensitive_fields": None,
        }
        state = manifest.create(ctx, planned)
        assert state["id"] == key and state["uid"] and state["live_uid"] == state["uid"]
        applied.append(state)
    first = applied[0]
    assert admin.get_or_none(_url(first)) is not None
    assert manifest.read(ctx, first) is not None
    for state in applied:
        manifest.delete(ctx, state)
    assert admin.get_or_none(_url(first)) is None
    assert manifest.read(ctx, first) is None


def _url(state: dict[str, Any]) -> str:
    api_version = state["api_version"]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = {
        "ServiceAccount": "serviceaccounts",
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "ConfigMap": "configmaps",
        "Deployment": "deployments",
        "RoleBinding": "rolebindings",
        "Role": "roles",
    }.get(state["kind"], state["kind"].lower() + "s")
    namespace = f"/namespaces/{state['namespace']}" if state.get("namespace") else ""
    return f"{prefix}{namespace}/{plural}/{state['name']}"


def test_helm_release_is_recorded_and_tells_the_cloud_what_it_installed(kube_api: Path) -> None:
    sim, cluster_id, config = _cluster(kube_api)
    admin = _admin(kube_api, cluster_id)
    ctx = CallContext(provider_config={"kubernetes": config})
    release = helm.HANDLERS.resources["helm_release"]
    # filesystem.tf's CSI chart
    planned = {
        "name": "csi-mounted-fs-path",
        "chart": "csi-mounted-fs-path",
        "repository": "oci://cr.eu-north1.nebius.cloud/mk8s",
        "version": "0.1.3",
        "namespace": "kube-system",
        "create_namespace": True,
        "atomic": True,
        "wait": True,
        "set": [
            {"name": "dataDir", "value": "/mnt/data/csi-mounted-fs-path-data/", "type": None},
            {"name": "image.repository", "value": "cr.eu-north1.nebius.cloud/mk8s/csi", "type": None},
        ],
        "values": None,
        "set_sensitive": [{"name": "token", "value": "s3cr3t", "type": None}],
    }
    state = release.create(ctx, planned)
    assert state["status"] == "deployed" and state["metadata"]["revision"] == 1
    assert "s3cr3t" not in state["metadata"]["values"]
    secrets = admin.list("/api/v1/namespaces/kube-system/secrets", "owner=helm,name=csi-mounted-fs-path")
    assert [s["metadata"]["name"] for s in secrets] == ["sh.helm.release.v1.csi-mounted-fs-path.v1"]
    stored = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secrets[0]["data"]["release"]))))
    assert stored["config"]["image"]["repository"] == "cr.eu-north1.nebius.cloud/mk8s/csi"
    assert stored["chart"]["metadata"]["version"] == "0.1.3"
    assert sim.cluster_snapshot(cluster_id)[0]["addons"]["filestore"] is True  # type: ignore[index]

    with pytest.raises(ProviderError, match="re-use a name"):
        release.create(ctx, planned)
    upgraded = release.update(ctx, {**planned, "version": "0.1.4"}, state)
    assert upgraded["metadata"]["revision"] == 2
    labels = {
        s["metadata"]["name"]: s["metadata"]["labels"]["status"]
        for s in admin.list("/api/v1/namespaces/kube-system/secrets", "owner=helm")
    }
    assert labels == {
        "sh.helm.release.v1.csi-mounted-fs-path.v1": "superseded",
        "sh.helm.release.v1.csi-mounted-fs-path.v2": "deployed",
    }
    assert release.import_(ctx, "kube-system/csi-mounted-fs-path")["metadata"]["revision"] == 2

    with pytest.raises(ProviderError, match="not found"):
        release.create(ctx, {**planned, "name": "x", "namespace": "nowhere", "create_namespace": False})

    release.delete(ctx, upgraded)
    assert admin.list("/api/v1/namespaces/kube-system/secrets", "owner=helm") == []
    assert "filestore" not in (sim.cluster_snapshot(cluster_id)[0]["addons"])  # type: ignore[index]
    assert release.read(ctx, upgraded) is None
