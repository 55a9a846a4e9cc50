"""Reading a file someone else may have planted: no link followed unless asked, no open or
read that blocks, nothing beyond a size cap.

clusterdiag runs as root in the prolog and in ``agent --clear``, and as the service user in
the agent, over files in a directory the service user can write (state files, the agent's
report) and files an operator points at (token files). A FIFO there would block ``open()``
until a writer came (the prolog past its budget), a link to ``/dev/zero`` would be read
until memory ran out, a link to a root file would be read or written as root. So each of
these files is opened ``O_NONBLOCK`` (and ``O_NOFOLLOW`` unless the caller follows links on
purpose), checked to be a regular file on the open descriptor (no race between a check
and the open), and read up to ``limit`` bytes: more is an error, not a truncated file.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from pathlib import Path

    StrPath = str | Path


def open_regular_fd(path: StrPath, *, dir_fd: int | None = None, follow: bool = False) -> int:
    """A read-only descriptor on ``path``, or OSError: a link (unless ``follow``), or
    anything but a regular file, is refused with a reason a person understands."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, "a symbolic link (not followed)", str(path)) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"not a regular file ({file_kind(info.st_mode)})", str(path))
    return fd


def read_fd(fd: int, limit: int, path: StrPath) -> bytes:
    """Up to ``limit`` bytes of ``fd``; OSError(EFBIG) when there are more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return b"".join(chunks)


def read_regular(path: StrPath, limit: int, *, dir_fd: int | None = None,
                 follow: bool = False) -> bytes:
    """The whole of a small regular file (see the module doc for what is refused)."""
    fd = open_regular_fd(path, dir_fd=dir_fd, follow=follow)
    try:
        if os.fstat(fd).st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return read_fd(fd, limit, path)
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words (\"a FIFO\")."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a plain file"


def describe(exc: OSError) -> str:
    """One line for an OSError from here or from ``os``: its reason, never a repr."""
    return exc.strerror or str(exc)
