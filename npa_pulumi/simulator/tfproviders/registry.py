"""Every local provider's handlers by registry address `<namespace>/<type>`: the one table the worker
reads (a provider's Go side is its schema file, tools/localcloud-providers/schemas/). nebius acts on the
local cloud's database; helm, kubernetes and kubectl on the cluster's real API server."""

from __future__ import annotations

from npa_pulumi.simulator.tfproviders import helm, http, kubectl, kubernetes, nebius, random, time
from npa_pulumi.simulator.tfproviders.base import ProviderHandlers

PROVIDERS: dict[str, ProviderHandlers] = {
    "nebius/nebius": nebius.HANDLERS,
    # dstaroff/units serves functions only, in Go: no handlers.
    "dstaroff/units": ProviderHandlers(),
    "hashicorp/helm": helm.HANDLERS,
    "hashicorp/kubernetes": kubernetes.HANDLERS,
    "gavinbunney/kubectl": kubectl.HANDLERS,
    "hashicorp/random": random.HANDLERS,
    "hashicorp/time": time.HANDLERS,
    "hashicorp/http": http.HANDLERS,
}
