"""Which handlers serve which provider: `<namespace>/<type>` (the address the Go shim was started for) to
that provider's handlers. The worker (`python -m npa_pulumi.simulator.tfproviders <namespace>/<type>`)
dispatches through this dict."""

from __future__ import annotations

from npa_pulumi.simulator.tfproviders import helm, http, kubectl, kubernetes, random, time
from npa_pulumi.simulator.tfproviders.base import ProviderHandlers

REGISTRY: dict[str, ProviderHandlers] = {
    "hashicorp/helm": helm.HANDLERS,
    "hashicorp/kubernetes": kubernetes.HANDLERS,
    "gavinbunney/kubectl": kubectl.HANDLERS,
    "hashicorp/random": random.HANDLERS,
    "hashicorp/time": time.HANDLERS,
    "hashicorp/http": http.HANDLERS,
}
