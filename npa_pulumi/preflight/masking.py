"""Masking of live resource ids that must never be published in full (capacity block groups)."""

from __future__ import annotations

_SUFFIX = 4


def mask_id(resource_id: str) -> str:
    """`capacityblockgroup-e00abcdef1234a1b2` → `capacityblockgroup-…a1b2`.

    The resource-type prefix stays so a reader knows what the id is; at most four characters (and never more
    than half of the unique part) of the id itself are shown, enough to tell two blocks apart in one report.
    """
    head, sep, tail = resource_id.strip().partition("-")
    if not sep or not tail:
        # No type prefix to keep (or nothing after it): show only the masked id itself.
        head, sep, tail = "", "", resource_id.strip()
    shown = min(_SUFFIX, len(tail) // 2)
    return f"{head}{sep}…{tail[-shown:] if shown else ''}"
