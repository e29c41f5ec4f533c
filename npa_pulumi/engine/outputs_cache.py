"""The stack outputs a command has read, cached for its run: each stack's outputs read once (in parallel
for a walk's stacks), then asked of the cache by every later step of the command (`status`'s costs,
`up`'s no-op checks, the identity of a result)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.graph import parallel
from npa_pulumi.output.stack_outputs import StackOutputs

Outputs = dict[str, Any] | None


class OutputsCache:
    """Outputs of each stack (None when it does not exist), as `read` (the engine) returns them."""

    def __init__(self, read: Callable[[StackOp], Outputs], concurrency: int) -> None:
        self._read = read
        self._concurrency = concurrency
        self._outputs: dict[str, Outputs] = {}

    def read_all(self, ops: Sequence[StackOp], refresh: bool = False) -> dict[str, Outputs]:
        """Outputs of each stack of `ops`, those not read yet (every one with `refresh`) in parallel."""
        wanted = [op for op in ops if refresh or op.stack not in self._outputs]
        if wanted:
            read = parallel(wanted, self._read, self._concurrency)
            for op, outputs in zip(wanted, read, strict=True):
                self._outputs[op.stack] = outputs
        return {op.stack: self._outputs.get(op.stack) for op in ops}

    def read_one(self, op: StackOp) -> Outputs:
        """One stack's outputs through the same cache, read in the calling thread (a worker of a walk that
        visits every stack: `status` reads each once, and its cost then reads them from here)."""
        if op.stack not in self._outputs:
            self._outputs[op.stack] = self._read(op)
        return self._outputs[op.stack]

    def cached(self, stack: str) -> Outputs:
        """The outputs last read for `stack` (None when unread or absent): no engine is asked."""
        return self._outputs.get(stack)

    def deployed_by_fleet(self, stack: str) -> bool:
        """Whether the stack's outputs (as read) say npa-pulumi deployed it: it was tagged then."""
        return StackOutputs.read(self._outputs.get(stack)).deployed_by_fleet
