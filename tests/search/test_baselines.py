"""Baselines: the three rules, clamped to the study's space."""

from __future__ import annotations

from loadersearch.hardware import Hardware
from loadersearch.search.baselines import baselines
from loadersearch.search.space import SearchSpace

HOST = Hardware(cpu_count=16, physical_cores=8, gpu_count=1)


def test_baselines_follow_each_rule_on_a_gpu_host() -> None:
    space = SearchSpace(num_workers=(0, 32), batch_size=(8, 64))
    by_name = {b.name: b.config for b in baselines(space, HOST, gpu=True)}
    assert by_name["pytorch"].num_workers == 0 and not by_name["pytorch"].pin_memory
    assert by_name["article"].num_workers == 16 and by_name["article"].pin_memory
    assert by_name["ultralytics"].num_workers == 8
    assert by_name["ultralytics"].prefetch_factor == 4 and by_name["ultralytics"].pin_memory
    assert {c.batch_size for c in by_name.values()} == {16}


def test_baselines_that_clamp_to_one_config_are_merged() -> None:
    space = SearchSpace(num_workers=(0, 0), batch_size=(8, 8))
    found = baselines(space, HOST, gpu=False)
    # Without workers and without a GPU, Ultralytics' rule is PyTorch's defaults.
    assert sorted(b.name for b in found) == ["article", "pytorch+ultralytics"]
    assert all(b.config.num_workers == 0 and b.config.batch_size == 8 for b in found)
