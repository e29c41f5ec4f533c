"""`python -m benchmarks.fingerprints SPEC`: the fingerprint every stack of SPEC records when `up` deploys it
(engine/fingerprint.py, through the SDK as the CLI computes it), as one JSON object on stdout.

Run under a benchmark home's environment (benchmarks/harness.Home.env), so that the cloud, the toolchain
and the policy packs it covers are the ones the benchmark's commands see. benchmarks/cloned_fleet.py gives
each cloned stack the fingerprint `up` would have recorded for it.
"""

from __future__ import annotations

import json
import sys

from npa_pulumi.sdk.operations import open_fleet, select
from npa_pulumi.sdk.requests import FleetRequest


def fingerprints(spec: str) -> dict[str, str]:
    context = open_fleet(select(spec), FleetRequest()).context
    plans = context.plans()
    found = {plan.stack: context.fingerprint(plan) for plan in plans.projects}
    return found | {plan.stack: context.fingerprint(plan) for plan in plans.clusters}


if __name__ == "__main__":
    json.dump(fingerprints(sys.argv[1]), sys.stdout)
