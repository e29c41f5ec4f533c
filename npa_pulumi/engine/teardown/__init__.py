"""Teardown you can audit: `destroy` as ordered phases, each with an outcome, evidence and a receipt.

Per project of the selection the phases run in this order:

    cluster (one per cluster stack) -> network (the project stack) -> bucket -> storage-identity -> project

* cluster: the cluster is drained (drain.py: eviction through the API; the four kube-system
  PodDisruptionBudgets of the cluster's own workloads relaxed only for a confirmed destroy of a verified
  cluster, snapshotted in the receipt and restored if the destroy aborts; a user's budget never), then the
  cluster stack is destroyed whatever the drain's outcome (what it will delete is read from its outputs);
* network: the project stack is destroyed once none of the project's cluster stacks remain; an owned
  network/subnet goes with it, a reused subnet is only read and stays;
* bucket, storage-identity, project: retained unless asked for (`--delete-buckets`,
  `--delete-storage-identity`, `--delete-projects`), and even then deleted only with durable proof that
  this fleet created them: the creation recorded in the project stack's outputs (or, once that stack is
  gone, in the teardown record written before it was destroyed) *and* the fleet's labels on the live
  object. A bucket that holds objects is refused unless `--delete-nonempty-buckets`; the storage identity
  takes its keys and its bucket grant's IAM group (the fleet's labels) with it; a project that holds
  anything the fleet did not create (or anything retained), by the inventory of every kind the cloud
  port lists in a project, is refused. A project the spec names by id is used, never deleted.

Outcomes: `planned` (dry run), `done`, `absent` (nothing there: repeat-safe), `retained` (not asked for,
or not this run's to delete: why), `refused` (asked for but not proved safe to delete: why), `blocked`
(by which phase: a dependent phase is never guessed) or `failed` (why, and the exact retry command).
A refused, failed or blocked phase makes the run a partial cleanup (exit 2) whose receipt names the
`destroy --receipt ID --yes` that continues it; a retention alone is success (exit 0). Independent phases
continue when one fails: a failed bucket does not stop the storage identity, but it blocks the project.

Every destroy leaves a receipt, `<npa home>/teardown-receipts/<fleet>/<UTC time>-destroy.json` (0600):
what was asked and each phase's outcome with the ids deleted or retained. Receipts and teardown records
hold ids and flags only, never a secret (the access key's secret, a token, a capacity block).

Modules: `model.py` (options, evidence, the receipt version and phase groups), `records.py` (a project's
teardown record), `receipts.py` (the one receipt writer, for destroy, resume and the cloud sweep),
`phases.py` (the ownership-gated bucket, identity and project phases), `drain.py` (a cluster phase's
drain and its dry-run preview), `run.py` (a destroy's phases,
planned then run), `resume.py` (`destroy --receipt`), `cleanup.py` (the cloud sweep), `local_cleanup.py`
(`cleanup` without a spec: the npa home only, and with `--full` a killed run's scratch and caches of
earlier layouts).
"""
