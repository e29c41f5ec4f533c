"""`--shard K/N`: a stable subset of the fleet's clusters, so N machines (a CI matrix) share one fleet.

A cluster belongs to the shard that scores highest for its cluster stack name under rendezvous
(highest-random-weight) hashing: score(k) = sha256(f"{k}\\0{stack}") for k in 1..N. The owner of a
cluster depends only on its own stack name and N, never on the other clusters, so adding or removing
clusters moves no other cluster between shards; growing N to N+1 moves only about 1/(N+1) of them.
Shards are numbered 1..N as CI matrices usually are.

Project stacks are not sharded: every shard that owns a cluster of a project needs that project's stack
first, and takes it single-flight (see engine/orchestrator.py: a shard that finds it locked by another
shard waits for that shard to finish it, then finds it unchanged).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from npa_pulumi.errors import UserInputError

if TYPE_CHECKING:
    from npa_pulumi.plan.targets import Target

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 1024


class ShardError(UserInputError):
    kind = "invalid-shard"


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, cluster_stack: str) -> bool:
        return shard_of(cluster_stack, self.count) == self.index


def parse_shard(text: str) -> Shard:
    """`K/N` with 1 <= K <= N <= 1024."""
    match = _SHARD.match(text or "")
    if not match:
        raise ShardError(f"--shard {text!r}: expected K/N, e.g. 1/4 (shard K of N, counted from 1)")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise ShardError(f"--shard {text!r}: N must be between 1 and {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise ShardError(f"--shard {text!r}: K must be between 1 and N ({count})")
    return Shard(index, count)


def _score(index: int, stack: str) -> bytes:
    # N is not hashed: a shard's score for a stack is the same whatever the shard count, so growing N
    # to N+1 moves only the stacks the new shard wins.
    return hashlib.sha256(f"{index}\0{stack}".encode()).digest()


def shard_of(cluster_stack: str, count: int) -> int:
    """The 1-based shard of `count` that owns this cluster stack."""
    return max(range(1, count + 1), key=lambda k: _score(k, cluster_stack))


def select_shard(targets: Sequence[Target], shard: Shard | None) -> list[Target]:
    """The targets whose cluster stack this shard owns, in their spec order."""
    if shard is None:
        return list(targets)
    return [t for t in targets if shard.owns(t.cluster_stack)]
