"""The images ``skip_bad_samples`` replaced while a measurement decoded them, brought back to
the process that started it.

A truncated image has a fine header: the dataset check (:func:`.index.check_dataset`) passes
it, and it fails only when a DataLoader worker decodes it, in a process that prints to
nobody. Each such process appends ``path<TAB>reason`` to the file named by
:data:`SKIPPED_ENV` (set by the measuring parent, inherited by the child and its workers):
one short ``O_APPEND`` write per file, so that workers writing at once never mix their
lines, and what was written survives a child killed at its time limit. The parent reads it
(:func:`read_skipped`), names each new file once (:func:`announce`), and a study records
them (:func:`merge_into`).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

SKIPPED_ENV = "LOADERSEARCH_SKIPPED_FILE"
RECORDED_NAMES = 100  # file names a study keeps (the counts are always exact up to them)

# Files this process has named (announce): each one is named once, not once per measurement.
_announced: dict[str, bool] = {}


def note_skipped(path: str, reason: str) -> None:
    """Record that ``path`` was replaced because of ``reason``, for the measuring parent
    (nothing when no parent asked: a dataset used outside a measurement)."""
    target = os.environ.get(SKIPPED_ENV)
    if not target:
        return
    line = f"{path}\t{' '.join(reason.split())}\n".encode("utf-8", "replace")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    except OSError:  # the parent is gone, or the limit of open files: the warning stays
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_skipped(target: str) -> list[tuple[str, str]]:
    """The (path, reason) pairs written to ``target``, each path once, in order."""
    try:
        with open(target, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    found: dict[str, str] = {}
    for line in text.splitlines():
        path, sep, reason = line.partition("\t")
        if sep and path not in found:
            found[path] = reason
    return list(found.items())


def announce(found: list[tuple[str, str]]) -> list[str]:
    """The files of ``found`` that failed only when decoded (their header is fine: the dataset
    check did not see them), as ``"path: reason"``; each one is logged as a warning the first
    time this process meets it. A file whose header is bad was named by the check already."""
    from loadersearch.workload._datasets.decode import header_problem  # imports PIL

    decoded = []
    for path, reason in found:
        if path not in _announced:
            _announced[path] = header_problem(path) is None
            if _announced[path]:
                log.warning("--skip-bad-samples: skipping %s: %s (replaced by the next image)",
                            path, reason)  # fmt: skip
        if _announced[path]:
            decoded.append(f"{path}: {reason}")
    return decoded


def merge_into(record: dict | None, decoded: list[str]) -> dict | None:
    """The study's ``skipped_samples`` record with the files of ``decoded`` (as
    :func:`announce` gives them) added: ``failed_decoding`` counts the distinct files found
    when decoding, ``failed_decoding_files`` holds the first :data:`RECORDED_NAMES`. None when
    it would not change. The count is exact while the names are all kept; once they are not, a
    file cannot be told apart from those already counted, so it grows only to the most any
    one process has seen."""
    before = dict(record or {})
    record = dict(before)
    names = list(record.get("failed_decoding_files") or [])
    known = {name.partition(": ")[0] for name in names}
    new = [entry for entry in decoded if entry.partition(": ")[0] not in known]
    if not new:
        return None
    if len(names) < RECORDED_NAMES:  # every file counted so far is named: the new ones are
        record["failed_decoding"] = len(names) + len(new)
    else:
        seen = sum(1 for ok in _announced.values() if ok)
        record["failed_decoding"] = max(int(record.get("failed_decoding") or 0), seen)
    names.extend(new[: max(0, RECORDED_NAMES - len(names))])
    record["failed_decoding_files"] = names
    return None if record == before else record
