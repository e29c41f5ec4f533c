"""One module per fleet operation, each `run(context, ...) -> FleetResult` over a `FleetContext`
(engine/context.py) and the one scheduler (engine/scheduler.py). `engine/orchestrator.py`'s `Fleet` is the
thin façade the SDK calls."""
