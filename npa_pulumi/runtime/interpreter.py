"""Interpreter settings for the product's own command-lived Python processes: the CLI and the command's
shared provider host. Library users of `npa_pulumi.sdk` get none of them: their process is theirs to tune.

* The cyclic garbage collector runs less often. A command imports a few hundred modules and builds about
  80 pydantic models before its work starts: hundreds of thousands of long-lived objects, over which the
  collector, at its default threshold (a young-generation collection every 700 allocations), runs hundreds
  of times, about a tenth of the CPU of a command's imports. What a command makes after that is mostly
  acyclic (requests, JSON, engine events), so collecting less often costs little memory.
* Pydantic's plugins are off. They are observability hooks, found by reading every installed
  distribution's entry points when the first model is built, and have no business in a command's run; a
  `PYDANTIC_DISABLE_PLUGINS` the user set is kept.
"""

from __future__ import annotations

import gc
import os

# Allocations between two collections of the youngest generation (Python's default: 700).
GC_GEN0_THRESHOLD = 20_000


def tune_for_a_command() -> None:
    """Call first, before the modules a command needs are imported."""
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_GEN0_THRESHOLD), gen1, gen2)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
