"""What Nebius makes along with a new project, by name (no imports: the local cloud's provisioner reads it).

One network named `DEFAULT_NETWORK_NAME` and one subnet in it whose name starts with `DEFAULT_SUBNET_PREFIX`,
neither carrying the project's labels.
"""

DEFAULT_NETWORK_NAME = "default-network"
DEFAULT_SUBNET_PREFIX = "default-subnet-"
