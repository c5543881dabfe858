"""Why the accelerator idles, and what would help, measured: ``loadersearch diagnose``.

A layer beside :mod:`loadersearch.search`, on top of :mod:`loadersearch.measure`: it runs
measurements (no Optuna) and explains them. :func:`diagnose` returns a :class:`Diagnosis`
(the ceiling, prep and fetch stalls, the scaling curve, a verdict in words, measured remedies,
what-ifs and a timeline per measurement); :func:`write_outputs` writes it as JSON, PNG and HTML.
"""

from __future__ import annotations

from loadersearch.diagnose._diagnosis import diagnose
from loadersearch.diagnose._findings import COMPUTE, FETCH, PREP, Diagnosis, Measurement, Remedy
from loadersearch.diagnose._plots import PAIR_ATTR, pair_png, write_outputs
from loadersearch.diagnose._stored import Target, store_diagnosis, study_pipeline
from loadersearch.diagnose._timeline import Sampler, Timeline

__all__ = [
    "COMPUTE",
    "Diagnosis",
    "FETCH",
    "Measurement",
    "PAIR_ATTR",
    "PREP",
    "Remedy",
    "Sampler",
    "Target",
    "Timeline",
    "diagnose",
    "pair_png",
    "store_diagnosis",
    "study_pipeline",
    "write_outputs",
]
