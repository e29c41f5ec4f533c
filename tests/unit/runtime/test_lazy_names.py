"""Packages whose names load on first use (runtime/lazy_names.py): what a provider host, every command and
the local cloud's provisioner import stays small, and the names still resolve."""

from __future__ import annotations

import subprocess
import sys

import pytest

from npa_pulumi.runtime.lazy_names import lazy_names


def _loaded_after(statement: str, prefix: str = "npa_pulumi") -> set[str]:
    probe = f"import sys\n{statement}\nprint(' '.join(m for m in sys.modules if m.startswith({prefix!r})))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_bridge_loads_the_recipe_surface_without_the_plan_document() -> None:
    """The provider host's path to the recipe's variables (bridge.recipe -> plan.recipe_surface) does not
    bring the plan document, its cost model, the spec's models or rich (~0.45 s of CPU per command)."""
    loaded = _loaded_after("import npa_pulumi.bridge.recipe")
    assert "npa_pulumi.plan.recipe_surface" in loaded
    assert not loaded & {"npa_pulumi.plan.document", "npa_pulumi.plan.cost", "npa_pulumi.spec"}


def test_reading_an_s3_backend_does_not_load_the_nebius_adapter() -> None:
    """The backend reader loads its S3 client (ssl, urllib.request) only for an s3:// backend, and never
    the Nebius gRPC adapter."""
    loaded = _loaded_after("import npa_pulumi.engine.automation.diy_backend", prefix="")
    assert not loaded & {"npa_pulumi.cloud.nebius.s3", "ssl", "npa_pulumi.cloud.nebius.adapter"}
    loaded = _loaded_after(
        "import os\n"
        "os.environ.pop('AWS_SESSION_TOKEN', None)\n"
        "os.environ.update(AWS_ACCESS_KEY_ID='key', AWS_SECRET_ACCESS_KEY='secret')\n"
        "from npa_pulumi.engine.automation.diy_backend import s3_bucket\n"
        "assert s3_bucket('s3://state?endpoint=http://127.0.0.1:9&region=eu-north1') is not None"
    )
    assert "npa_pulumi.cloud.nebius.s3" in loaded
    assert "npa_pulumi.cloud.nebius.adapter" not in loaded


def test_the_local_clouds_provisioner_loads_neither_pydantic_nor_the_cloud_port() -> None:
    """Terraform starts `python -m npa_pulumi.simulator.api` once per local-cloud object it creates or
    deletes; the cloud port's records (pydantic) cost ~0.3 s of CPU per start and it needs none of them."""
    loaded = _loaded_after("import npa_pulumi.simulator.api", prefix="")
    assert "npa_pulumi.simulator.simulator" in loaded
    assert not loaded & {"pydantic", "npa_pulumi.cloud.port", "yaml", "urllib.request"}


def test_the_names_resolve_on_first_use() -> None:
    from npa_pulumi import components, plan
    from npa_pulumi.cloud import nebius

    assert plan.plan_document.__module__ == "npa_pulumi.plan.document"
    assert nebius.NebiusCloud.__module__ == "npa_pulumi.cloud.nebius.adapter"
    assert components.TerraformModule.__name__ == "TerraformModule"
    assert "render_tfvars" in dir(plan)


def test_a_name_is_kept_once_loaded_and_an_unknown_one_is_an_attribute_error() -> None:
    import json.decoder

    namespace: dict[str, object] = {}
    getattr_, dir_ = lazy_names("json", {"JSONDecoder": "decoder"}, namespace)
    assert dir_() == ["JSONDecoder"]
    assert getattr_("JSONDecoder") is json.decoder.JSONDecoder
    assert namespace == {"JSONDecoder": json.decoder.JSONDecoder}
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr_("nope")


def test_a_name_may_be_offered_under_another_name_of_its_module() -> None:
    import json.decoder

    namespace: dict[str, object] = {}
    getattr_, dir_ = lazy_names("json", {"Decoder": "decoder:JSONDecoder"}, namespace)
    assert dir_() == ["Decoder"]
    assert getattr_("Decoder") is json.decoder.JSONDecoder
    assert namespace == {"Decoder": json.decoder.JSONDecoder}
