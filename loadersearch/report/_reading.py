"""Open a study for reading: the storage named (or the default one) and the study in it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadersearch.errors import StudyError

if TYPE_CHECKING:
    import optuna


def open_study(storage: str | None = None, study: str | None = None) -> optuna.Study:
    """Load a study (``study`` may be omitted when the storage holds exactly one)."""
    import optuna

    from loadersearch.storage import open_existing_storage, redact_url, resolve_storage_url

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)
    names = [s.study_name for s in rdb.get_all_studies()]
    if study is None:
        if len(names) != 1:
            listing = ", ".join(names) if names else "none"
            raise StudyError(
                f"{redact_url(url)} holds {len(names)} studies ({listing}); name one with --study."
            )
        study = names[0]
    if study not in names:
        raise StudyError(
            f"no study {study!r} in {redact_url(url)}; studies there: "
            f"{', '.join(names) or 'none'}."
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loaded = optuna.load_study(study_name=study, storage=rdb)
    from loadersearch.search import require_loadersearch_study

    require_loadersearch_study(loaded, redact_url(url))
    return loaded


def space_fixed(study: optuna.Study) -> dict[str, Any]:
    """The knobs the study's space fixes (not Optuna parameters, but part of every config)."""
    from loadersearch.search import SearchSpace, stored_spec

    space = stored_spec(study.user_attrs, "space")
    return SearchSpace.from_dict(space).fixed() if space else {}
