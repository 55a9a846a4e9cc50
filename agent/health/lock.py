"""The validation lock: ``validate.lock`` in the agent's state directory, held by a
validation for its whole run.

Two health checks must never start two validations, and a job must not start on a node
whose validation is running (an operator resumed it half-way: a burn and a job would share
the GPUs, and each would read the other's load as the node's fault). ``flock(2)`` gives
both: an exclusive lock belongs to the open file description, so it goes with the
descriptor into the validation the health check starts (``subprocess`` ``pass_fds``), and
the kernel drops it when the last descriptor closes, however the process ended: a
validation killed half-way leaves no stale lock (flock(2), "Locks created by flock() are
associated with an open file description"). The file itself holds nothing.

The prolog asks ``running`` on every job: one ``open`` that fails with ENOENT on a node
that never validated, else one ``flock`` and a ``close``. So this module imports only
``os``, and ``fcntl`` (an extension module: a ``dlopen``, a millisecond of the prolog's
start) only where there is a lock file to ask (tests/unit/test_prolog_imports.py pins
the prolog's imports).
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from pathlib import Path

NAME = "validate.lock"


def path(state_dir: str | Path) -> str:
    return os.path.join(os.fspath(state_dir), NAME)


def take(state_dir: str | Path) -> int | None:
    """A descriptor holding the lock, or None when a validation holds it. The file is
    created when missing, never through a link, and must be a regular file (OSError)."""
    import fcntl  # see the module's docstring

    fd = os.open(path(state_dir), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                 | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path(state_dir))
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        raise
    return fd


def adopt(state_dir: str | Path, fd: int) -> int:
    """The lock a health check took and handed to this validation as ``fd``: checked to be
    this directory's lock file (same device and inode) and held (flock on a description
    that already holds the lock only confirms it). OSError when it is not."""
    import fcntl  # see the module's docstring

    info, there = os.fstat(fd), os.stat(path(state_dir), follow_symlinks=False)
    if (info.st_dev, info.st_ino) != (there.st_dev, there.st_ino):
        raise OSError(errno.EBADF, f"descriptor {fd} is not the validation lock",
                      path(state_dir))
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def running(state_dir: str | Path) -> bool:
    """Whether a validation holds the lock now. A lock file that cannot be opened (none,
    a link) holds nothing."""
    try:
        fd = os.open(path(state_dir), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)
    except OSError:
        return False
    import fcntl  # only where there is a lock file: see the module's docstring

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
