"""The fleet's health after day one: the judgement of nodes and maintenance (`model.py`), watching it over
time with metrics and events (`watch.py`) and requalifying replaced nodes (`requalification.py`)."""
