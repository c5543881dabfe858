"""Baselines: the three rules, clamped to the study's space."""

from __future__ import annotations

from loadersearch import Hardware
from loadersearch.search._baselines import baselines
from loadersearch.search._space import SearchSpace

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


def test_the_rules_split_per_rank_for_a_ddp_job() -> None:
    host = Hardware(cpu_count=32, physical_cores=16, gpu_count=4)
    space = SearchSpace(num_workers=(0, 8), batch_size=(8, 64))
    found = baselines(space, host, gpu=True, ranks=4)
    by_name = {b.name: b for b in found}
    assert by_name["ultralytics"].config.num_workers == 8  # min(32 // 4, 8)
    assert "32 CPUs // 4 GPUs" in by_name["ultralytics"].rule
    assert by_name["article"].config.num_workers == 4  # the article's multi-GPU loader
    assert by_name["article"].config.pin_memory and "2-8 x 4 GPUs" in by_name["article"].rule
    assert by_name["pytorch"].config.num_workers == 0


def test_cpu_ranks_split_the_cores_without_pinning() -> None:
    host = Hardware(cpu_count=2, physical_cores=2, gpu_count=0)
    space = SearchSpace(num_workers=(0, 1), batch_size=(8, 32))
    by_name = {n: b.config for b in baselines(space, host, gpu=False, ranks=2)
               for n in b.name.split("+")}  # fmt: skip
    assert by_name["ultralytics"].num_workers == 1 and not by_name["ultralytics"].pin_memory
    assert by_name["article"].num_workers == 1  # 4 per rank, clamped to the bound
