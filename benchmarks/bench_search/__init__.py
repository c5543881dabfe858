"""Library code of ``benchmarks/benchmark_search.py``: proving the search against exhaustive grid
search, random search and the rules of thumb, and measuring the overhead of the study itself.

Not part of the user-facing CLI; the script wires these modules together.
"""

from __future__ import annotations
