"""Package discovery for the repository layout.

components/, policies/ and recipes/ sit at the top level of the repository, but they are installed as
npa_pulumi.components, npa_pulumi.policies and npa_pulumi.recipes (see package-dir in pyproject.toml),
which pyproject's declarative `packages.find` cannot express.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["npa_pulumi", "npa_pulumi.*"])
packages += ["npa_pulumi.components"] + [f"npa_pulumi.components.{p}" for p in find_packages("components")]
packages += ["npa_pulumi.policies", "npa_pulumi.policies.fleet_guardrails_lib", "npa_pulumi.recipes"]

setup(packages=packages)
