"""What Nebius makes along with a new project, by name (no imports: the local cloud's provisioner reads it).

One network named `DEFAULT_NETWORK_NAME`, one subnet in it whose name starts with `DEFAULT_SUBNET_PREFIX`,
and the network's default security group (marked `default` by the cloud) whose name starts with
`DEFAULT_SECURITY_GROUP_PREFIX`, none of them carrying the project's labels.
"""

DEFAULT_NETWORK_NAME = "default-network"
DEFAULT_SUBNET_PREFIX = "default-subnet-"
DEFAULT_SECURITY_GROUP_PREFIX = "default-security-group-"
