"""An exclusive ``flock`` that waits for its holder, with a hook before it waits: the host's
measurement lock (:mod:`loadersearch._hostlock`) and a SQLite study's set-up lock
(:mod:`loadersearch.storage`) both take one. The kernel releases it when the descriptor is
closed or its process dies, even by ``kill -9``.
"""

from __future__ import annotations

import errno
import fcntl
from collections.abc import Callable

# What flock(LOCK_NB) raises when another descriptor holds the lock (EACCES on some systems).
_HELD = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


def lock_exclusive(
    fd: int,
    path: str,
    error: type[Exception],
    on_busy: Callable[[], None] | None = None,
) -> bool:
    """Lock ``fd`` (the open file ``path``) exclusively; returns whether it had to wait.

    When another process holds the lock, ``on_busy()`` runs first (it may raise, to refuse to
    wait), then this waits for it (EINTR is retried; a signal handler may raise). Any other
    failure raises ``error("cannot lock PATH: REASON.")``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError as e:
        if e.errno not in _HELD:
            raise error(f"cannot lock {path}: {e.strerror}.") from e
    if on_busy is not None:
        on_busy()
    fcntl.flock(fd, fcntl.LOCK_EX)
    return True
