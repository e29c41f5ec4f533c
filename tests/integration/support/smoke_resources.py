"""A tiny Python dynamic provider for the engine smoke test.

It lives in an importable module (the test puts this directory on PYTHONPATH) because the engine runs
dynamic providers in a separate Python process that unpickles the provider by reference.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult


class EchoProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(
            id_=f"echo-{props['message']}",
            outs={"message": props["message"], "shout": props["message"].upper()},
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = olds.get("message") != news.get("message")
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={"message": news["message"], "shout": news["message"].upper()})


class Echo(pulumi.dynamic.Resource, module="smoke", name="Echo"):
    message: pulumi.Output[str]
    shout: pulumi.Output[str]

    def __init__(self, name: str, message: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(EchoProvider(), name, {"message": message, "shout": None}, opts)
