"""``bench`` and ``run`` in a container's small /dev/shm, as a user meets it: a private 1 MiB
/dev/shm (``unshare``; the machine's own is never touched)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers.cliproc import cli_env
from helpers.small_shm import skip_without_private_mounts, under_small_shm

# 256 px: a batch of 16 is 3 MiB, so no worker ever fits in 1 MiB; 0 workers always do.
PLAN = ["--img-size", "256", "--epochs", "1", "--steps", "2", "--windows-per-epoch", "1",
        "--warmup-epochs", "0"]  # fmt: skip


def _loadersearch(tmp_path, *args: str):
    done = under_small_shm(
        "1m", [sys.executable, "-m", "loadersearch", *args], env=cli_env(tmp_path), timeout=600
    )
    return done.returncode, done.stdout + done.stderr


def test_bench_says_what_dev_shm_holds_and_a_configuration_over_it_is_infeasible(
    tmp_path, tiny_dataset
):
    skip_without_private_mounts()
    code, out = _loadersearch(
        tmp_path, "bench", "--workload", "loader", "--data", tiny_dataset, "--num-workers",
        "2", "--batch-size", "16", *PLAN,
    )  # fmt: skip
    assert code == 3, out
    assert "Traceback" not in out
    assert "/dev/shm 1.0 MiB, 1.0 MiB free; this configuration (2 workers x batch 16 x " \
        "prefetch 2) needs about 12.0 MiB" in out  # fmt: skip
    assert "warning: this configuration" in out
    [line] = [ln for ln in out.splitlines() if ln.startswith("INFEASIBLE")]
    assert line.startswith("INFEASIBLE (shm_full): /dev/shm ran out (1.0 MiB in all)")
    assert "--shm-size" in line and "--ipc=host" in line


def test_a_study_under_a_1_mib_dev_shm_finishes_with_a_configuration_that_works_there(
    tmp_path, tiny_dataset
):
    skip_without_private_mounts()
    code, out = _loadersearch(
        tmp_path, "run", "--workload", "emulated", "--emulated-ms", "1,0.1", "--data",
        tiny_dataset, "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study", "shm",
        "--trials", "4", "--space", "batch_size=16:16", "--space", "num_workers=0:2",
        "--confirm-rounds", "0", "--no-probe", *PLAN,
    )  # fmt: skip
    assert code == 0, out
    assert "Traceback" not in out
    assert "the largest configuration (2 workers x batch 16 x prefetch 8) needs about" in out
    assert "infeasible (shm_full)" in out  # the baselines with workers
    assert "num_workers=0" in out.split("Paste into your training code:")[1]


def test_under_a_32_mib_dev_shm_the_search_starts_its_configurations_at_a_queue_that_fits(
    tmp_path, tiny_dataset
):
    """A container's /dev/shm of 32 MiB at 256 px (a batch of 16: 3 MiB): the run says that
    memory bounds the queue (half of /dev/shm: ~85 images in flight) and the search's own
    configurations take the deepest prefetch that fits (2 at 2 workers x batch 16, 4 at 1,
    where the default 8 would need 48 MiB or 24 MiB): every one of them measures."""
    import optuna

    skip_without_private_mounts()
    db = tmp_path / "s.db"
    done = under_small_shm(
        "32m", [sys.executable, "-m", "loadersearch", "run", "--workload", "emulated",
                "--emulated-ms", "1,0.1", "--data", tiny_dataset, "--storage",
                f"sqlite:///{db}", "--study", "shm", "--trials", "5", "--space",
                "batch_size=16:16", "--space", "num_workers=0:2", "--confirm-rounds", "0",
                "--no-probe", "--no-settle", *PLAN],
        env=cli_env(tmp_path), timeout=600,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    assert "Memory (/dev/shm 32.0 MiB" in out and "about 85 images" in out, out
    study = optuna.load_study(study_name="shm", storage=f"sqlite:///{db}")
    own = [t for t in study.trials if not t.user_attrs.get("baseline")]
    assert own, [t.params for t in study.trials]
    for t in own:
        workers = t.params.get("num_workers", 0)
        if workers:
            assert workers * t.params["prefetch_factor"] * 16 <= 85, t.params
        assert t.state == optuna.trial.TrialState.COMPLETE, (t.params, t.user_attrs)
    assert any(t.params.get("num_workers") == 2 for t in own), [t.params for t in own]
    assert study.user_attrs["inflight_images"] == pytest.approx(85.1, abs=0.1)
    assert study.user_attrs["memory_bound"].startswith("Memory (/dev/shm 32.0 MiB")
    # Resumed outside the container (this machine's /dev/shm: GiBs), the study keeps its
    # creator's bound and says so with the creator's sizes: the same trials propose the same
    # next configurations anywhere (a deeper queue comes only as the search's own late move).
    more = subprocess.run(
        [sys.executable, "-m", "loadersearch", "run", "--workload", "emulated", "--emulated-ms",
         "1,0.1", "--data", tiny_dataset, "--storage", f"sqlite:///{db}", "--study", "shm",
         "--trials", "7", "--space", "batch_size=16:16", "--space", "num_workers=0:2",
         "--confirm-rounds", "0", "--no-probe", "--no-settle", *PLAN],
        env=cli_env(tmp_path), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert more.returncode == 0, more.stdout + more.stderr
    assert "Memory (/dev/shm 32.0 MiB" in more.stdout + more.stderr  # the creator's sizes
    study = optuna.load_study(study_name="shm", storage=f"sqlite:///{db}")
    assert len(study.trials) == 7
    assert study.user_attrs["inflight_images"] == pytest.approx(85.1, abs=0.1)  # not 24 GiB's
