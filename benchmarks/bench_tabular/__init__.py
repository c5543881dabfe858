"""Library of the tabular search benchmark (``benchmarks/tabular_grid.py`` measures the table,
``benchmarks/tabular_replay.py`` replays the search methods against it)."""
