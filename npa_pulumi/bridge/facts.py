"""Read, from a materialized recipe itself, what it does with the shared filesystem.

Policies (`filestore-nofail-mount`) check these facts before anything is applied, so a recipe change that
drops `nofail` or attaches the filesystem read-only is caught at preview time.

The upstream k8s-training recipe's layout is read: it attaches the filesystem in each
`nebius_mk8s_v1_node_group` template (`attach_mode`, `mount_tag`) and mounts it from
`modules/cloud-init/*.tftpl` (`[tag, path, "virtiofs", options, ...]`). Anything not found is reported as
empty, which the policy treats as a violation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

NODE_GROUP_KINDS = {"cpu": ("cpu",), "gpu": ("gpu", "gb300")}


_NODE_GROUP = re.compile(r'resource\s+"nebius_mk8s_v1_node_group"\s+"([^"]+)"')
_ATTACH = re.compile(r'attach_mode\s*=\s*"([^"]+)"')
_TAG = re.compile(r'mount_tag\s*=\s*("?)([^"\s]+)\1')
_MOUNT = re.compile(r'\[\s*"?([^",\]]+)"?\s*,\s*"?([^",\]]+)"?\s*,\s*"?(virtiofs)"?\s*,\s*"([^"]*)"')


def _upstream_facts(module_dir: Path, modules_dir: Path | None) -> dict[str, Any]:
    attachments: list[dict[str, str]] = []
    for tf in sorted(module_dir.glob("*.tf")):
        text = tf.read_text(errors="replace")
        matches = list(_NODE_GROUP.finditer(text))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
            body = text[match.end() : end]
            attach = _ATTACH.search(body)
            if not attach:
                continue
            name = match.group(1).lower()
            kind = "gpu" if any(k in name for k in NODE_GROUP_KINDS["gpu"]) else "cpu"
            tag = _TAG.search(body)
            attachments.append(
                {"node_group": kind, "attach_mode": attach.group(1), "mount_tag": tag.group(2) if tag else ""}
            )
    mount: dict[str, str] | None = None
    search_roots = [module_dir] + ([modules_dir] if modules_dir else [])
    for root in search_roots:
        for template in sorted(root.rglob("*.tftpl")):
            found = _MOUNT.search(template.read_text(errors="replace"))
            if found:
                mount = {
                    "tag": found.group(1),
                    "path": found.group(2),
                    "fs_type": found.group(3),
                    "options": found.group(4),
                }
                break
        if mount:
            break
    return {"filesystem_attachments": attachments, "filesystem_mount": mount}


def read_recipe_facts(module_dir: Path, modules_dir: Path | None = None) -> dict[str, Any]:
    return _upstream_facts(module_dir, modules_dir)
