"""The read-only verifiers of deployed clusters (`verifiers.py`: verify-mig, -graphics, -storage;
`fabric.py`: verify-fabric) and the private receipts of the repairs `--reconcile` makes."""
