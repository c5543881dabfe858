"""Limits of this process (``ulimit -n``, ``ulimit -v``) and a full disk, named as what they
are: an error line that says which limit stopped what and how to raise it, instead of a crash
of the tool. The measuring child inherits the limits of the process that starts it, so the
parent can read them to explain how the child died."""

from __future__ import annotations

import errno
import resource

from loadersearch.errors import LoaderSearchError, ResourceLimitError

_FD_SIGNS = ("too many open files", "received 0 items of ancdata", "[errno 24]")
_MEMORY_SIGNS = (
    "failed to map segment",
    "cannot allocate memory",
    "std::bad_alloc",
    "memoryerror",
    "[errno 12]",
)


def soft_limit(which: int) -> int | None:
    """The soft limit of ``which`` (a ``resource.RLIMIT_*``), None when unlimited."""
    try:
        soft, _ = resource.getrlimit(which)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


def fd_limit_said(text: str) -> bool:
    """Whether ``text`` (a process's output) says it ran out of file descriptors."""
    low = text.lower()
    return any(sign in low for sign in _FD_SIGNS)


def fd_problem() -> str:
    n = soft_limit(resource.RLIMIT_NOFILE)
    limit = f"{n}" if n is not None else "its limit"
    return (
        f"too many open files: this process may open {limit} (ulimit -n); raise the limit "
        "(e.g. ulimit -n 65536) or use fewer DataLoader workers"
    )


def address_space_problem(what: str = "a memory allocation failed") -> str | None:
    """A sentence naming the address-space limit, or None when there is none."""
    v = soft_limit(resource.RLIMIT_AS)
    if v is None:
        return None
    return (
        f"{what} under the address-space limit (ulimit -v {v // 1024} KiB), not for lack of "
        "host RAM: PyTorch and each DataLoader worker map far more than they use; raise it "
        "(ulimit -v unlimited)"
    )


def limit_problem(text: str, *, aborted: bool = False) -> str | None:
    """The process limit that explains ``text`` (an error message or the last output of a
    process that died; ``aborted``: it died of SIGABRT/SIGSEGV/SIGBUS), as a sentence with
    the fix, or None when no limit explains it."""
    low = text.lower()
    if fd_limit_said(low):
        return fd_problem()
    if "cuda out of memory" in low:
        return None  # device memory: the VRAM cap, not a process limit
    if aborted or any(sign in low for sign in _MEMORY_SIGNS):
        what = "PyTorch could not be loaded" if "failed to map segment" in low else None
        return address_space_problem(what or "the process ran out of memory")
    return None


def naming(e: OSError, path: str) -> OSError:
    """``e`` with ``path`` as its file where it names none (a full disk says so on write or
    close, without the file's name), so that its message names the place to free."""
    if e.filename is None:
        e.filename = str(path)
    return e


def environment_error(e: OSError) -> LoaderSearchError | None:
    """An OSError that is the environment's, not a bug (too many open files, no space left,
    a read-only file system, out of memory under a limit), as an error with one clear line;
    None otherwise."""
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return ResourceLimitError(f"{fd_problem()}.")
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        from loadersearch.errors import DiskFullError
        from loadersearch.storage import describe_space

        where = e.filename or "."
        return DiskFullError(
            f"no space left on the device writing {where} ({describe_space(str(where))}); "
            "free some space there and run the same command again."
        )
    if e.errno == errno.EROFS:  # a place no check before it foresaw (the study's are checked)
        where = e.filename or "a file"
        return LoaderSearchError(
            f"cannot write {where}: its file system is read-only. Run where it is writable, "
            "or point the option or variable that names that place elsewhere."
        )
    if e.errno == errno.ENOMEM:
        problem = address_space_problem()
        if problem:
            return ResourceLimitError(f"{problem}.")
    return None
