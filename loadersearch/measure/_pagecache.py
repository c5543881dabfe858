"""The page cache of a dataset's files: read them in, evict them, and check which are resident.

A cold measurement (the fetch stall of ``loadersearch diagnose``) needs the dataset's bytes out
of memory. ``posix_fadvise(POSIX_FADV_DONTNEED)`` asks the kernel to drop a file's clean pages;
it needs no root, but the kernel may keep pages that are dirty, mapped or in use, and some file
systems (network, FUSE, overlay in some containers) ignore it. So an eviction is never trusted:
:func:`residency` asks ``mincore(2)`` which of the file's pages are in memory, and the caller
says so when the eviction did not work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PAGE = mmap.PAGESIZE
_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = None


def _load_libc():  # noqa: ANN202 - a ctypes library
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        _libc = libc
    return _libc


def dataset_files(root: str | os.PathLike) -> list[str]:
    """Every regular file under ``root`` (images, labels, annotations), sorted; hidden files
    and directories (a generator's marker, a lock) are left out."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append(path)
    return found


def file_residency(path: str) -> tuple[int, int]:
    """``(resident_pages, pages)`` of ``path`` in the page cache, from ``mincore(2)`` on a
    shared read-only mapping (which itself reads nothing). OSError when it cannot tell."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    pages = (size + PAGE - 1) // PAGE
    libc = _load_libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed: {os.strerror(err)}", path)
        try:
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore failed: {os.strerror(err)}", path)
            resident = sum(b & 1 for b in vec.raw)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return resident, pages


@dataclass(frozen=True)
class Residency:
    """How much of a set of files is in the page cache."""

    files: int
    bytes: int  # the files' total size
    pages: int
    resident_pages: int
    checked: bool  # False: mincore could not answer (the fraction is unknown)

    @property
    def fraction(self) -> float | None:
        if not self.checked:
            return None
        return self.resident_pages / self.pages if self.pages else 0.0

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "pages": self.pages,
            "resident_pages": self.resident_pages,
            "checked": self.checked,
            "fraction": self.fraction,
        }


def residency(paths: Iterable[str]) -> Residency:
    """The page-cache residency of ``paths`` together (``checked`` False if any file could not
    be asked)."""
    files = nbytes = pages = resident = 0
    checked = True
    for path in paths:
        try:
            nbytes += os.path.getsize(path)
            r, p = file_residency(path)
        except OSError:
            checked = False
            continue
        files += 1
        pages += p
        resident += r
    return Residency(files, nbytes, pages, resident, checked)


def evict(paths: Iterable[str]) -> int:
    """Ask the kernel to drop ``paths`` from the page cache (``fdatasync`` first, so that
    freshly written pages are clean and can go). Returns how many files were advised; the
    caller checks the result with :func:`residency`."""
    advised = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                os.fdatasync(fd)
            except OSError:
                pass  # a read-only file system: its pages are clean anyway
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            advised += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return advised


def warm(paths: Iterable[str], chunk: int = 1 << 20) -> int:
    """Read ``paths`` whole, so that their pages are in the page cache; returns the bytes read."""
    total = 0
    for path in paths:
        try:
            with open(path, "rb", buffering=0) as f:
                while data := f.read(chunk):
                    total += len(data)
        except OSError:
            continue
    return total


class ColdCache:
    """A cold measurement's evictions: the dataset's files under ``root`` are evicted before
    each measured epoch, and what ``mincore`` said was still resident right after each
    eviction is kept for the result (``page_cache``)."""

    def __init__(self, root: str | None) -> None:
        self.files = dataset_files(root) if root and os.path.isdir(root) else []
        self.after: list[dict[str, Any]] = []

    def evict(self, epoch: int) -> None:
        evict(self.files)
        self.after.append(residency(self.files).to_dict())

    def summary(self) -> dict[str, Any]:
        fractions = [a["fraction"] for a in self.after]
        checked = bool(self.after) and all(f is not None for f in fractions)
        return {
            "files": len(self.files),
            "bytes": self.after[0]["bytes"] if self.after else 0,
            "evictions": len(self.after),
            "checked": checked,
            # the worst epoch: how much of the dataset was still in memory after eviction
            "resident_after_evict": max(fractions) if checked else None,
        }
