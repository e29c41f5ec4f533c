"""Pulumi behind one fence: the only code that imports `pulumi.automation` or reads and writes the
engine's own DIY backend files (tools/check_layers.py holds every other module to it).

* `workspace.py`: the backend URL, secrets, the workspace and the engine's environment;
* `stack_operations.py`: one Pulumi operation on one stack (StackOp, StackExecutor), its events and log;
* `stacks.py`: tags, listing, stale locks and pending operations through the Automation API;
* `diy_backend.py`: checkpoints, locks and tags read straight from a DIY backend (format versions pinned).
"""
