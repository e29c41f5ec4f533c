"""Cluster backends: what one target's backend owns (its recipe, plan, stack program, gate state, preflight
demand and native status), behind one interface (`base.ClusterBackend`), one folder per backend named after
its kind (spec.constants.BackendKind), found through `registry`. The fleet keeps target identity, projects
and shared networks; nothing outside a backend's folder names that backend."""
