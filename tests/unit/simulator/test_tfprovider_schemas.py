"""The local providers' schema files (tools/localcloud-providers/schemas, PROTOCOL.md's format) for the
non-nebius providers: each parses and is well formed, and together they cover every resource and data
source type, and every provider argument, that upstream k8s-training uses (read from the module itself,
../shared/upstream, with python-hcl2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hcl2
import pytest

REPO = Path(__file__).resolve().parents[3]
SCHEMAS = REPO / "tools" / "localcloud-providers" / "schemas"
UPSTREAM = REPO.parent / "shared" / "upstream" / "nebius-solutions-library"
HOSTNAMES = ["registry.terraform.io", "registry.opentofu.org"]
# Served by this repository's other providers (nebius, units) or built into Terraform.
ELSEWHERE = ("nebius_", "terraform_data", "units_")
PROVIDERS = {
    ("hashicorp", "helm"): "3.0.2",
    ("hashicorp", "kubernetes"): "3.0.1",
    ("hashicorp", "random"): "3.7.1",
    ("hashicorp", "time"): "0.13.1",
    ("hashicorp", "http"): "3.5.0",
    ("gavinbunney", "kubectl"): "1.19.0",
}
SCALARS = {"string", "number", "bool", "dynamic"}
FLAGS = {"required", "optional", "computed", "sensitive", "write_only", "replace", "keep"}


def _schemas() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for namespace, type_ in PROVIDERS:
        path = SCHEMAS / f"{namespace}-{type_}.json"
        found[(namespace, type_)] = json.loads(path.read_text())
    return found


def _check_type(t: Any, where: str) -> None:
    if isinstance(t, str):
        assert t in SCALARS, f"{where}: unknown type {t!r}"
        return
    assert isinstance(t, dict) and len(t) == 1, f"{where}: a type is a scalar name or a one-key object"
    ((kind, inner),) = t.items()
    assert kind in ("list", "set", "map", "object"), f"{where}: unknown collection {kind!r}"
    if kind == "object":
        for name, field in inner.items():
            _check_type(field, f"{where}.{name}")
    else:
        _check_type(inner, f"{where}[]")


def _check_attributes(attributes: dict[str, Any], where: str) -> None:
    for name, attr in attributes.items():
        here = f"{where}.{name}"
        flags = set(attr) - {"type", "nested", "attributes"}
        assert flags <= FLAGS, f"{here}: unknown flags {flags - FLAGS}"
        assert attr.get("required") or attr.get("optional") or attr.get("computed"), f"{here}: no mode"
        assert not (attr.get("required") and attr.get("computed")), f"{here}: required and computed"
        if "nested" in attr:
            assert attr["nested"] in ("single", "list", "set", "map"), here
            _check_attributes(attr["attributes"], here)
        else:
            _check_type(attr["type"], here)


def _check_block(block: dict[str, Any], where: str) -> None:
    _check_attributes(block.get("attributes") or {}, where)
    for name, nested in (block.get("blocks") or {}).items():
        assert nested["nesting"] in ("list", "set", "single"), f"{where}.{name}"
        assert set(nested) <= {"nesting", "min_items", "max_items", "attributes", "blocks"}, f"{where}.{name}"
        _check_block(nested, f"{where}.{name}")


@pytest.mark.parametrize(("namespace", "type_"), list(PROVIDERS))
def test_a_schema_file_is_well_formed_and_names_its_provider(namespace: str, type_: str) -> None:
    schema = _schemas()[(namespace, type_)]
    assert (schema["namespace"], schema["type"]) == (namespace, type_)
    assert schema["version"] == PROVIDERS[(namespace, type_)]
    assert schema["hostnames"] == HOSTNAMES
    assert "docs" in schema["source"], "each schema says which documentation it follows"
    _check_block(schema["provider"], f"{type_}.provider")
    for kind in ("resources", "data_sources", "ephemeral_resources"):
        for name, block in (schema.get(kind) or {}).items():
            assert name.startswith(type_) or type_ == "http", f"{name} is not a {type_} type"
            _check_block(block, f"{type_}.{kind}.{name}")


def _upstream_blocks() -> list[dict[str, Any]]:
    if not UPSTREAM.is_dir():
        pytest.fail(f"upstream k8s-training is expected at {UPSTREAM} (../shared beside the checkout)")
    documents = []
    for path in sorted(UPSTREAM.rglob("*.tf")):
        with path.open() as handle:
            documents.append(hcl2.load(handle))
    return documents


def _used_types(kind: str) -> set[str]:
    used = set()
    for document in _upstream_blocks():
        for entry in document.get(kind) or []:
            used |= {name.strip('"') for name in entry}
    return {t for t in used if not t.startswith(ELSEWHERE)}


def test_every_other_provider_type_upstream_uses_has_a_schema() -> None:
    schemas = _schemas().values()
    resources = {name for s in schemas for name in s.get("resources") or {}}
    data_sources = {name for s in schemas for name in s.get("data_sources") or {}}
    used_resources, used_data = _used_types("resource"), _used_types("data")
    # The module's own inventory (the facts file's "Other providers" table): a parse that found nothing
    # would otherwise pass.
    assert {
        "helm_release",
        "kubernetes_job_v1",
        "kubectl_manifest",
        "random_string",
        "time_static",
    } <= used_resources
    assert {"http", "kubectl_file_documents", "kubernetes_resource"} <= used_data
    assert used_resources <= resources, f"no schema for {sorted(used_resources - resources)}"
    assert used_data <= data_sources, f"no schema for {sorted(used_data - data_sources)}"


def _provider_args(name: str) -> dict[str, Any]:
    with (UPSTREAM / "k8s-training" / "provider.tf").open() as handle:
        document = hcl2.load(handle)
    for entry in document["provider"]:
        if name in entry or f'"{name}"' in entry:
            block = entry.get(name) or entry[f'"{name}"']
            return {k: v for k, v in block.items() if not k.startswith("__")}
    raise AssertionError(f"upstream provider.tf configures no {name}")


@pytest.mark.parametrize(("namespace", "type_"), [("hashicorp", "kubernetes"), ("gavinbunney", "kubectl")])
def test_the_provider_arguments_upstream_sets_are_in_the_schema(namespace: str, type_: str) -> None:
    attributes = _schemas()[(namespace, type_)]["provider"]["attributes"]
    for argument in _provider_args(type_):
        assert argument in attributes, f"{type_}: the provider block's {argument} has no schema"
    assert attributes["token"].get("sensitive") and attributes["host"].get("optional")


def test_helm_v3_takes_kubernetes_as_a_nested_attribute_with_what_upstream_sets() -> None:
    schema = _schemas()[("hashicorp", "helm")]
    kubernetes = schema["provider"]["attributes"]["kubernetes"]
    assert kubernetes["nested"] == "single" and "blocks" not in schema["provider"]
    configured = _provider_args("helm")["kubernetes"]
    assert set(configured) <= set(kubernetes["attributes"])
    release = schema["resources"]["helm_release"]["attributes"]
    # Plugin framework: `set` is a list of objects, `values` a list of strings.
    assert release["set"]["nested"] == "list" and set(release["set"]["attributes"]) == {
        "name",
        "value",
        "type",
    }
    assert release["values"]["type"] == {"list": "string"}


def test_kubernetes_metadata_spec_and_timeouts_are_blocks() -> None:
    job = _schemas()[("hashicorp", "kubernetes")]["resources"]["kubernetes_job_v1"]
    assert {"metadata", "spec", "timeouts"} <= set(job["blocks"])
    assert job["blocks"]["metadata"]["max_items"] == 1
    assert job["attributes"]["wait_for_completion"]["optional"]
    pod = job["blocks"]["spec"]["blocks"]["template"]["blocks"]["spec"]
    assert {"container", "init_container", "security_context"} <= set(pod["blocks"])
    assert set(job["blocks"]["timeouts"]["attributes"]) == {"create", "update", "delete"}
