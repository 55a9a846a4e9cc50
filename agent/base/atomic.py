"""Files replaced whole: written to a temp file in the same directory, fsynced, renamed over
the old one, then the directory fsynced so the rename itself survives a power cut. A reader
sees the old file or the new one, never half of either: what the agent's state directory
and the NCCL version cache rely on."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TMP_PREFIX = ".tmp-"
"""The prefix of a temp file not yet renamed: a reader of the directory skips these."""


def write_atomic(path: Path, body: bytes) -> None:
    """``path`` replaced whole by ``body`` (``write_in`` its directory)."""
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_in(dir_fd, path.name, body)
    finally:
        os.close(dir_fd)


def write_in(dir_fd: int, name: str, body: bytes) -> None:
    """``name`` in the directory ``dir_fd`` replaced whole by ``body``.

    The temp file has an unpredictable name and is created with ``O_EXCL|O_NOFOLLOW``: a
    link or file planted under any name we could pick is never opened, so root (``agent
    --clear``) can neither truncate nor give away a file the link points at."""
    tmp = f"{TMP_PREFIX}{name}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o640, dir_fd=dir_fd)
    try:
        try:
            own_like_directory(fd, dir_fd)
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        # A full disk fails mid-write: the partial temp file would hold on to the very
        # space the next attempt needs (and a tiny tmpfs would stay full for good).
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def own_like_directory(fd: int, dir_fd: int) -> None:
    """Root (``clusterdiag agent --clear`` with the agent stopped) writes the agent's files
    for it: owned by root, mode 0640, the agent (``User=clusterdiag``) could no longer read
    them. So a root writer gives each file it just created to whoever owns the directory."""
    if os.geteuid() != 0:
        return
    info = os.fstat(dir_fd)
    if (info.st_uid, info.st_gid) != (0, 0):
        os.fchown(fd, info.st_uid, info.st_gid)
