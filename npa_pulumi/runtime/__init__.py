"""The bottom layer: what every other layer shares and nothing product-specific.

The npa home and its paths, atomic files, the disk cache, file locks, process liveness, the orphan
watchdog and supervised subprocesses, the retry policy, the toolchain pins and where the pinned binaries
are. Modules here import only the standard library and each other (docs/architecture.md).
"""
