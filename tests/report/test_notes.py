"""The notes optuna-dashboard shows, written with its own save_note, read back with get_note."""

from __future__ import annotations

import optuna
from hand_study import WINNER, add_trial, cfg
from optuna.trial import TrialState
from optuna_dashboard import get_note, save_note

from loadersearch.measure import INFEASIBLE_ADVICE, VRAM_CAP
from loadersearch.report import importances, publish, summarize
from loadersearch.report._notes import (
    BEGIN,
    END,
    IMPORTANCE_PLOT_ID,
    NoteContext,
    merge_note,
    study_note,
    trial_note,
)


def _trial_notes(study: optuna.Study) -> dict[int, str]:
    return {t.number: get_note(optuna.Trial(study, t._trial_id)) for t in study.trials}


def test_merge_keeps_a_person_s_own_text_and_replaces_only_loadersearch_s_block():
    first = merge_note("my own remark", "old answer")
    assert first.startswith(BEGIN) and first.endswith("my own remark")
    second = merge_note(first, "new answer")
    assert "new answer" in second and "old answer" not in second
    assert second.count(BEGIN) == 1 and second.count(END) == 1
    assert second.endswith("my own remark")
    assert merge_note(second, "new answer") == second


def test_the_study_note_gives_the_answer_and_its_evidence(hand_study):
    note = study_note(summarize(hand_study), importances(hand_study))
    assert f"## Confirmed winner: {WINNER.label()}" in note
    assert "89.0 img/s (median of 3 interleaved re-measurements, 87.0..90.0" in note
    assert WINNER.snippet() in note
    assert "| pytorch | w0 b16 | 50.0 | trial | 1.78x |" in note  # speedup over a baseline
    assert "| article | w4 b16 pin pf2 | 72.0 | confirmation | 1.24x |" in note
    assert '"Best Trial" is trial 2' in note  # why the dashboard's card differs
    assert "host testhost: Test CPU, 8 CPUs (4 physical cores)" in note
    assert "1 x NVIDIA Test (8 GiB)" in note
    assert "PED-ANOVA on 4 distinct finished configurations (trials 0-3)" in note
    assert "Largest batch under the cap: 32 (probed 32 fits, 64 over)." in note


def test_trial_notes_say_what_each_trial_is_to_the_study(hand_study):
    summary = summarize(hand_study)
    ctx = NoteContext.of(hand_study, summary)
    notes = {t.number: trial_note(t, ctx) for t in hand_study.trials}
    assert notes[3].startswith("**Confirmed winner**")
    assert notes[2].startswith("**Finalist**") and "1.05x as fast" in notes[2]
    assert "**Baseline `pytorch`**: PyTorch defaults." in notes[0]
    assert "**Repeat of trial 2**" in notes[4]
    assert "**Infeasible (vram_cap)**: over the VRAM cap at batch 32." in notes[6]
    assert INFEASIBLE_ADVICE[VRAM_CAP].note in notes[6]
    assert "**Pruned after window 2 of 4 (measured epoch 1)**" in notes[5]
    assert "clearly slower than trial 2" in notes[5] and "30.5 against 90.0 img/s" in notes[5]
    assert "**Failed**: ValueError: boom." in notes[7]
    surplus = add_trial(hand_study, cfg(2, 8), None, state=TrialState.FAIL, windows=[],
                        surplus="budget reached by other workers; not measured")  # fmt: skip
    assert trial_note(surplus, ctx).startswith("**Not measured**: budget reached by other")
    assert "Windows, img/s: 88 88 88 88" in notes[3]
    assert "Data-wait per window: 25% 25% 25% 25%" in notes[3]


def test_publish_writes_every_note_once_and_keeps_what_a_person_wrote(hand_study):
    save_note(hand_study, "Checked on the real GPU: holds.")
    assert publish(hand_study) == {"study": 1, "trials": 8}
    assert publish(hand_study) == {"study": 0, "trials": 0}  # nothing changed
    note = get_note(hand_study)
    assert "Confirmed winner" in note and note.endswith("Checked on the real GPU: holds.")
    assert all(n.startswith(BEGIN) for n in _trial_notes(hand_study).values())
    system = hand_study._storage.get_study_system_attrs(hand_study._study_id)
    assert any(k.startswith(f"dashboard:plot_data:{IMPORTANCE_PLOT_ID}:") for k in system)


def test_a_run_with_the_trial_hooks_notes_each_trial_and_attaches_its_windows(
    tmp_path, monkeypatch
) -> None:
    from helpers.studies import HOST, quick_settings, steady_measure
    from optuna.artifacts import get_all_artifact_meta

    from loadersearch.report import trial_hooks
    from loadersearch.report._notes import WINDOWS_PNG
    from loadersearch.search import run_study

    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path / "locks"))
    settings = quick_settings(tmp_path, trials=4)
    run_study(
        settings, measure_fn=steady_measure(), hardware=HOST, **trial_hooks(settings.storage)
    )

    study = optuna.load_study(study_name="t", storage=settings.storage)
    notes = _trial_notes(study)
    assert len(notes) == 4 and all(n.startswith(BEGIN) for n in notes.values())
    assert (tmp_path / "t.db-artifacts").is_dir()
    for t in study.trials:
        files = [a.filename for a in get_all_artifact_meta(t, storage=study._storage)]
        assert files == ([] if "repeat_of" in t.user_attrs else [WINDOWS_PNG])
    assert get_note(study) == ""  # the study note is the confirming run's (publish), not theirs


def test_an_inconclusive_answer_is_never_headlined_as_confirmed(hand_study):
    # A default run on a busy machine: the note and the report called it "Confirmed winner".
    from loadersearch.report._html import render_html

    confirmation = {**hand_study.user_attrs["confirmation"], "busy_rounds": 2}
    hand_study.set_user_attr("confirmation", confirmation)
    summary = summarize(hand_study)
    note = study_note(summary, importances(hand_study))
    assert f"## Inconclusive winner (busy machine): {WINNER.label()}" in note
    assert "Confirmed winner" not in note and "Inconclusive: 2 of 3" in note
    ctx = NoteContext.of(hand_study, summary)
    assert trial_note(hand_study.trials[3], ctx).startswith("**Inconclusive winner")
    page = render_html(summary, importances(hand_study), {})
    assert "Confirmed winner" not in page and "Inconclusive: 2 of 3" in page


def test_the_machine_section_states_the_study_s_cpu_budget(hand_study):
    import io

    from rich.console import Console

    from loadersearch._cpu_budget import CpuBudget
    from loadersearch.report import render_summary
    from loadersearch.report._html import render_html

    summary = summarize(hand_study)
    assert summary.cpu_budget is None  # a study from before budgets: nothing to state
    assert "CPU budget" not in study_note(summary, importances(hand_study))
    quota = "the cgroup CPU quota (/sys/fs/cgroup/cpu.max 600000 100000 = 6 CPUs)"
    budget = CpuBudget(cpus=6, ranks=2, machine_cpus=8, limit=quota, ranks_source="--gpus")
    hand_study.set_user_attr("cpu_budget", budget.to_dict())
    summary = summarize(hand_study)
    line = (
        f"6 CPUs allowed by {quota}, 2 ranks (--gpus): 3 CPUs each, workers searched up to 3 "
        "each; 2 workers each leave one CPU for each training process"
    )
    assert summary.cpu_budget == line
    assert f"GiB). CPU budget: {line}. Noise:" in study_note(summary, importances(hand_study))
    page = render_html(summary, importances(hand_study), {})
    assert f'<p id="cpu-budget">CPU budget: {line}.</p>' in page
    out = io.StringIO()
    render_summary(summary, storage=None, console=Console(file=out, width=400))
    assert f"CPU budget: {line}" in out.getvalue()


def test_the_machine_section_states_the_study_s_memory_bound(hand_study):
    """The creator's note of the bound on the search's prefetch queue (a container's small
    /dev/shm), in the report, its page and the dashboard's note; nothing where it bounds
    nothing."""
    import io

    from rich.console import Console

    from loadersearch.report import render_summary
    from loadersearch.report._html import render_html

    assert summarize(hand_study).memory_bound is None
    line = ("Memory (/dev/shm 1.0 GiB, RAM 23.5 GiB): the batches in flight (workers x "
            "prefetch_factor x batch) are kept to about 1,033 images (half of /dev/shm, a "
            "tenth of the RAM), so the search starts each configuration at the deepest "
            "prefetch_factor that fits (up to 8), with a smaller batch where one batch a worker "
            "does not fit, and tries deeper ones later.")  # fmt: skip
    hand_study.set_user_attr("memory_bound", line)
    summary = summarize(hand_study)
    assert summary.memory_bound == line
    assert f"{line} Noise:" in study_note(summary, importances(hand_study))
    assert f'<p id="memory-bound">{line}</p>' in render_html(summary, importances(hand_study), {})
    out = io.StringIO()
    render_summary(summary, storage=None, console=Console(file=out, width=400))
    assert line in out.getvalue()
