"""`npa-pulumi local-cloud …`: the local cloud's command group, a package of its own above the CLI.

It is registered in the `npa_pulumi.commands` entry-point group (pyproject.toml) as the simulator's adapter
is in `npa_pulumi.clouds`: `cli/main.py` finds it there, so the product's CLI never imports the simulator.
It uses the CLI's shared helpers (`cli/common.py`) and the simulator; nothing imports it
(tools/check_layers.py).
"""
