"""npa-pulumi benchmarks (issue 10): `make bench-quick` / `make bench`, or `python -m benchmarks --help`.

See benchmarks/README.md for what each scenario measures and docs/performance.md for the latest numbers.
"""
