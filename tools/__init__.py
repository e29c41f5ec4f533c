"""The repository's own tools (not part of the package): the toolchain (toolchain.py, toolchainlib/) and
the layering check (check_layers.py). A package, so that the toolchain script and the tests import
`tools.toolchainlib` by one name."""
