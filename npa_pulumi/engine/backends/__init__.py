"""Cluster backends: what one target's backend owns (its plan, its stack's program, its gate's state),
behind one interface (`base.ClusterBackend`), one module per backend, found through `registry`. The fleet
keeps target identity, projects and shared networks; `mk8s` is the first backend."""
