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


# A 64-CPU host whose container may use 4 of them (2 physical cores): a CPU quota.
QUOTA = "the cgroup CPU quota (/sys/fs/cgroup/cpu.max 400000 100000 = 4 CPUs)"
LIMITED = Hardware(cpu_count=64, physical_cores=32, usable_cpus=4, usable_cores=2,
                   cpu_limit=QUOTA, gpu_count=1)  # fmt: skip


def test_the_rules_count_the_cpus_of_the_budget_not_the_machine() -> None:
    space = SearchSpace(num_workers=(0, 32), batch_size=(8, 64))
    by_name = {b.name: b for b in baselines(space, LIMITED, gpu=True)}
    assert by_name["article"].config.num_workers == 4  # 2 x 2 usable physical cores, not 64
    assert "2 x 2 usable physical cores" in by_name["article"].rule
    assert by_name["ultralytics"].config.num_workers == 4  # min(4 // 1, 8), not min(64, 8)
    assert "min(4 usable CPUs // 1 GPUs, 8)" in by_name["ultralytics"].rule
    assert "Ultralytics itself reads os.cpu_count() = 64" in by_name["ultralytics"].rule


def test_an_injected_budget_wins_and_an_unlimited_host_reads_as_before() -> None:
    from loadersearch._cpu_budget import CpuBudget

    space = SearchSpace(num_workers=(0, 32), batch_size=(8, 64))
    budget = CpuBudget(cpus=3, cores=3, machine_cpus=16)
    by_name = {b.name: b for b in baselines(space, HOST, gpu=True, budget=budget)}
    assert by_name["ultralytics"].config.num_workers == 3
    assert by_name["article"].config.num_workers == 6
    # a host that may use all its CPUs: the rules and their lines as without a budget
    whole = Hardware(cpu_count=16, physical_cores=8, usable_cpus=16, usable_cores=8, gpu_count=1)
    assert baselines(space, whole, gpu=True) == baselines(space, HOST, gpu=True)
    assert "min(16 CPUs // 1 GPUs, 8) workers, prefetch 4, pin_memory when a GPU" in (
        {b.name: b.rule for b in baselines(space, whole, gpu=True)}["ultralytics"]
    )


def test_a_run_states_its_cpu_budget_and_the_study_keeps_it(tmp_path, monkeypatch) -> None:
    import optuna
    from helpers.studies import quick_settings, steady_measure

    from loadersearch.search._progress import Progress
    from loadersearch.search._study import run_study

    class Notes(Progress):
        def __init__(self) -> None:
            self.notes: list[str] = []

        def notice(self, text: str) -> None:
            self.notes.append(text)

    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path / "locks"))
    affinity = "this process's CPU affinity (3 of the machine's 8)"
    host = Hardware(host="test", cpu_count=8, physical_cores=4, usable_cpus=3, usable_cores=3,
                    cpu_limit=affinity)  # fmt: skip
    settings = quick_settings(tmp_path, trials=3)
    progress = Notes()
    run_study(settings, measure_fn=steady_measure(), hardware=host, progress=progress)
    line = (
        f"3 CPUs allowed by {affinity}, 1 process: workers searched up to 6 (above the CPUs, "
        "for loads that wait on storage); 2 workers leave one CPU for the training process"
    )
    assert f"CPU budget: {line}." in progress.notes
    stored = optuna.load_study(study_name="t", storage=settings.storage).user_attrs
    assert stored["cpu_budget"]["line"] == line
    assert (stored["cpu_budget"]["cpus"], stored["cpu_budget"]["workers_per_rank"]) == (3, 2)
    ultralytics = {b["name"]: b for b in stored["baselines"]}["ultralytics"]
    assert "min(3 usable CPUs // 1 GPUs, 8)" in ultralytics["rule"]
