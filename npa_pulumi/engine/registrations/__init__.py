"""The fleet's clusters as their users reach them: kubeconfigs and npa-pulumi's cluster registry
(`kubeconfigs.py`), and the original `npa fleet`'s records under `~/.npa/clusters/` (`npa_records.py`)."""
