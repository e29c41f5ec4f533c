"""Setting up a machine for a fleet: `doctor` (what this machine needs for the chosen cloud, checked
read-only) and `backend init` (a team's state bucket). Above the engine, beside the SDK: it reads the
engine's backend settings but runs no operation."""
