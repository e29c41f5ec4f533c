"""`python -m npa_pulumi.simulator.tfproviders <namespace>/<type>`: a provider's worker (PROTOCOL.md)."""

import sys

from npa_pulumi.simulator.tfproviders.worker import main

sys.exit(main(sys.argv[1:]))
