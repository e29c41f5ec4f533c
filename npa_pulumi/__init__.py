"""npa-pulumi: Nebius GPU training-cluster fleets from one npa.fleet/v0.0.1 spec, on Pulumi."""

__version__ = "0.1.0"
