"""The staged rollout's section of the PR comment (output/markdown.py): its waves, in order, with the
clusters each holds in the order they start, each wave's soak, and the clusters an `up` now would hold for
maintenance and why, bounded like every other section of the comment."""

from __future__ import annotations

from typing import Any

from npa_pulumi.spec.durations import describe

MAX_WAVES = 20
MAX_HELD = 20
MAX_CLUSTERS_CELL = 1500


def _cell(text: str) -> str:
    flat = " ".join(text.replace("|", "\\|").split())
    return flat if len(flat) <= MAX_CLUSTERS_CELL else flat[: MAX_CLUSTERS_CELL - 1] + "…"


def rollout_section(rollout: dict[str, Any] | None) -> str:
    if not rollout or not rollout.get("waves"):
        return ""
    waves = rollout["waves"]
    limits = []
    if rollout.get("max_in_flight"):
        limits.append(f"at most {rollout['max_in_flight']} cluster(s) at once")
    if rollout.get("max_in_flight_per_reservation"):
        limits.append(f"{rollout['max_in_flight_per_reservation']} per capacity block group")
    lines = [
        "#### Rollout",
        "",
        f"`up` rolls this change out in {len(waves)} wave(s); each starts once every cluster of the one "
        f"before passed its health gate (halt on `{rollout.get('halt_on', 'gate-failure')}`"
        + (f"; {', '.join(limits)}" if limits else "")
        + ").",
        "",
        "| Wave | Takes | Clusters (in start order) |",
        "|--:|:--|:--|",
    ]
    held: list[str] = []
    for wave in waves[:MAX_WAVES]:
        reservations = wave.get("reservations") or {}
        marks = {key: " **held**" for key in wave.get("held") or {}}
        marks |= {key: " (under maintenance, taken)" for key in wave.get("taken_under_maintenance") or {}}
        names = ", ".join(
            (f"`{key}` ({reservations[key]})" if key in reservations else f"`{key}`") + marks.get(key, "")
            for key in wave.get("clusters") or []
        )
        rule = str(wave.get("rule", "")) + (
            f", then soak {describe(wave['soak_s'])}" if wave.get("soak_s") else ""
        )
        lines.append(f"| {wave['wave']} | {_cell(rule)} | {_cell(names or '—')} |")
        held += [f"- `{key}`: {_cell(str(why))}" for key, why in (wave.get("held") or {}).items()]
    if len(waves) > MAX_WAVES:
        lines.append(f"\n_… and {len(waves) - MAX_WAVES} more waves (see the JSON)._")
    if held:
        lines += [
            "",
            "**Held:** `up` would not start these clusters now (an active maintenance event or a node in "
            "`NebiusGPUError`); the others proceed. `up --ignore-maintenance` takes them anyway.",
            "",
            *held[:MAX_HELD],
        ]
        if len(held) > MAX_HELD:
            lines.append(f"- … and {len(held) - MAX_HELD} more (see the JSON).")
    if rollout.get("health_error"):
        lines += ["", f"_{_cell(str(rollout['health_error']))}_"]
    return "\n".join(lines) + "\n\n"
