"""`toolchain.py status`: what .tools/bin links to, and the KubeRay operator's build."""

from __future__ import annotations

import json
import os

from . import kuberay
from .common import TOOLS_BIN
from .pins import load_pins


def status(as_json: bool) -> int:
    pins = load_pins()
    report: dict[str, object] = {"pins": pins, "tools_bin": str(TOOLS_BIN), "links": {}}
    links: dict[str, str] = {}
    if TOOLS_BIN.exists():
        for entry in sorted(TOOLS_BIN.iterdir()):
            if entry.is_symlink():
                links[entry.name] = os.readlink(entry)
    report["links"] = links
    report["kuberay"] = built = kuberay.status(pins)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for name, target in links.items():
            print(f"{name:34} -> {target}")
        print(kuberay.status_line(built))
    return 0
