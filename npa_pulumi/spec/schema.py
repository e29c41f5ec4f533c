"""JSON Schema of the npa.fleet/v0.0.1 document, for editors (yaml-language-server) and CI linters.

The schema describes the written shape: field names, types, nesting, no unknown keys. Rules that span
fields (MIG's tested tuple, envelope mixing, uniqueness) are enforced by `load_spec`, not by the schema.
"""

from __future__ import annotations

from typing import Any

from npa_pulumi.spec.constants import API_VERSION, GPU_DRIVER_MODES
from npa_pulumi.spec.surface import FleetDocument

SCHEMA_ID = "https://schemas.npa-pulumi.dev/npa.fleet/v0.0.1.json"


def fleet_json_schema() -> dict[str, Any]:
    schema = FleetDocument.model_json_schema(by_alias=True, mode="validation")
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": f"npa fleet spec ({API_VERSION})",
    }
    schema["properties"]["apiVersion"] = {"const": API_VERSION, "description": "The spec version."}
    schema["required"] = ["name", "projects"]
    # Editors can offer the choices; the loader also accepts other spellings it normalizes (e.g. case).
    for definition in ("ClusterEntry", "Mk8sEnvelope"):
        properties = schema["$defs"][definition]["properties"]
        properties["gpu_driver_mode"]["examples"] = list(GPU_DRIVER_MODES)
        properties["gpu_workload_profile"]["examples"] = ["", "rtx-rendering"]
    return schema
