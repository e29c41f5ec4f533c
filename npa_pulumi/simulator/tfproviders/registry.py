"""Every local provider's handlers by registry address `<namespace>/<type>`: the one table the worker
reads (a provider's Go side is its schema file, tools/localcloud-providers/schemas/)."""

from __future__ import annotations

from npa_pulumi.simulator.tfproviders import nebius
from npa_pulumi.simulator.tfproviders.base import ProviderHandlers

PROVIDERS: dict[str, ProviderHandlers] = {
    "nebius/nebius": nebius.HANDLERS,
    # dstaroff/units serves functions only, in Go: no handlers.
    "dstaroff/units": ProviderHandlers(),
}
