"""Runs the measurements of one diagnosis (:mod:`loadersearch.diagnose._diagnosis` decides
which, :mod:`loadersearch.diagnose._verdict` measures the remedies through it): each with the
page cache as asked (read in and checked, evicted, or as it is) and a timeline beside it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from loadersearch._loader_config import LoaderConfig
from loadersearch.diagnose._findings import Measurement
from loadersearch.diagnose._timeline import Sampler
from loadersearch.measure import MeasurePlan, MeasureResult, measure, pagecache
from loadersearch.search import unusable_input
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)


class Runner:
    """Runs the measurements of one diagnosis, each with a timeline."""

    def __init__(
        self,
        spec: WorkloadSpec,
        plan: MeasurePlan,
        files: list[str],
        on_phase: Callable[[str], None],
        interval: float,
    ) -> None:
        self.spec = spec
        self.plan = plan
        self.files = files
        self.on_phase = on_phase
        self.interval = interval

    def run(
        self,
        name: str,
        what: str,
        config: LoaderConfig,
        *,
        spec: WorkloadSpec | None = None,
        cache: str = "warm",  # warm | cold | as-is
        resident: bool = False,
        timeline: bool = True,
    ) -> Measurement:
        self.on_phase(f"{name}: {what}")
        spec = spec or self.spec
        extra = dict(self.plan.extra)
        if resident:
            extra["resident"] = True
        residency_before = None
        if cache == "cold":
            extra["cold_cache"] = True
        elif cache == "warm" and self.files:
            pagecache.warm(self.files)
            residency_before = pagecache.residency(self.files).fraction
        plan = dataclasses.replace(self.plan, extra=extra)
        sampler = Sampler(self.interval).start() if timeline else None
        try:
            result: MeasureResult = measure(spec, config, plan)
        finally:
            if sampler is not None:
                sampler.stop()
        tl = sampler.timeline(result.steps) if sampler is not None else None
        m = Measurement(
            name=name,
            what=what,
            config=config,
            status=result.status,
            message=result.message,
            rate=result.objective if result.ok else 0.0,
            steady_rate=result.steady_rate if result.ok else 0.0,
            wait_fraction=result.wait_fraction,
            window_cv=result.window_cv,
            device=result.device,
            windows=len(result.windows),
            outside_share=result.outside_share,
            busy_host=result.busy_host,
            timeline=tl,
            page_cache=result.page_cache,
            residency_before=residency_before,
        )
        unusable = unusable_input(result, spec, resume=False)
        if unusable is not None:  # a bad image or pipeline fails every measurement alike
            raise unusable
        self.img_size = result.img_size
        self.dataset_images = result.dataset_images
        if not m.ok:
            logger.warning("%s: %s (%s)", name, result.status, result.message)
        return m
