"""The commands of tools/toolchain.py: ensure, status, gen-kubernetes-wrapper."""

from __future__ import annotations

import argparse
from functools import partial

from . import kubernetes, registry
from .common import ToolchainError, say
from .lanes import build_lanes, run_go_builds
from .pins import load_pins
from .status import status


def main(argv: list[str] | None = None, description: str | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="provide the toolchain (idempotent)")
    ensure.add_argument(
        "components", nargs="*", metavar="COMPONENT", help=f"all (default), {', '.join(registry.names())}"
    )
    st = sub.add_parser("status", help="show what is linked in .tools/bin")
    st.add_argument("--json", action="store_true")
    sub.add_parser(
        "gen-kubernetes-wrapper",
        help="regenerate tools/kubernetes/go.mod and go.sum from the pinned k8s.io/kubernetes go.mod",
    )
    args = parser.parse_args(argv)
    if args.command == "status":
        return status(args.json)
    pins = load_pins()
    try:
        if args.command == "gen-kubernetes-wrapper":
            kubernetes.gen_kubernetes_wrapper(pins)
            return 0
        wanted = set(args.components or ["all"])
        unknown = wanted - {"all", *registry.names()}
        if unknown:
            known = ", ".join(registry.names())
            parser.error(f"unknown component(s): {', '.join(sorted(unknown))}; expected all, {known}")
        if "all" in wanted:
            wanted = registry.default()
        for component in registry.first_steps(wanted):
            component.ensure(pins)
        run_go_builds([partial(c.ensure, pins) for c in registry.go_builds(wanted)], build_lanes())
    except ToolchainError as err:
        say(f"ERROR: {err}")
        return 1
    say("toolchain ready")
    return 0
