"""Reading /sys and /proc files under an injectable root, never raising for bad content.

Every reader returns ``(value, reason)``: a value when the file held what we expected,
otherwise ``None`` and a short reason ("missing", "Permission denied (EACCES)",
"garbage 'x'") that the collector records as unknown, so one bad file costs one value, not
the report. A reason other than "missing" is a file that is there and could not be read:
``unreadable`` tells the two apart, and such a value is reported as an error naming it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_NOT_REGULAR = "not a regular file"  # what a FIFO or device in the tree is refused as

Read = tuple[str | None, str | None]


class FileCounter:
    """Counts files read, for the snapshot's ``sources.*.files_read``."""

    def __init__(self) -> None:
        self.count = 0


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, or OSError unless it is a regular file.

    Every sysfs and procfs attribute is a regular file. Anything else in a captured or
    simulated tree (a FIFO above all) would block ``open()`` or ``read()`` until a writer
    came, taking the whole source past its deadline instead of costing one value, so the
    file is opened without blocking and looked at before it is read.
    """
    handle = open(path, "rb", opener=_nonblocking)  # noqa: SIM115 - returned to the caller
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise OSError(errno.EINVAL, _NOT_REGULAR, str(path))
    return handle


# One sysfs attribute is at most a page (the kernel's show() buffer, PAGE_SIZE), so one
# read() of a page returns it whole; a longer file (procfs tables, binary attributes) is
# read on in larger steps up to the caller's limit.
_PAGE = 4096
_STEP = 65536
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def _not_regular(fd: int, path: str | os.PathLike[str]) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, _NOT_REGULAR, str(path))


def _read_regular(path: str | os.PathLike[str], limit: int, dir_fd: int | None = None
                  ) -> bytes:
    """Up to ``limit`` bytes of a regular file, with the guard of ``open_regular`` but no
    file object: an attribute costs open, one read, close. The file's type is looked at
    only when the read says it may not be a regular file: nothing read (a FIFO without a
    writer reads as empty, never blocking with O_NONBLOCK) or a full page (a device).
    ``dir_fd``: ``path`` is relative to that open directory."""
    fd = os.open(path, _FLAGS, dir_fd=dir_fd)
    try:
        try:
            data = os.read(fd, min(limit, _PAGE))
        except IsADirectoryError:
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path)) from None
        if 0 < len(data) < _PAGE or len(data) >= limit:
            return data
        _not_regular(fd, path)
        parts = [data]
        total = len(data)
        while total < limit and (chunk := os.read(fd, min(_STEP, limit - total))):
            parts.append(chunk)
            total += len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _decimal(data: bytes) -> int | None:
    """``data`` as an unsigned 64-bit decimal, or None: empty (a FIFO), a whole page (a
    device), a sign, "N/A", Python's 1_000 are the slow path's to judge."""
    if not 0 < len(data) < _PAGE or not data[:1].isdigit() or b"_" in data:
        return None
    try:
        value = int(data)
    except ValueError:
        return None
    return value if value < 1 << 64 else None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def read_decimals(directory: str, counter: FileCounter | None = None
                  ) -> dict[str, int | None]:
    """Every file of a directory of counters, by name, sorted: the number it holds when
    one read() of it (open, read, close) gives a plain unsigned decimal, else None, and
    the caller reads that file again with ``read_text`` to say why; so the common case
    costs one call. The directory is opened once and each file relative to it, so the
    kernel walks the directory's path (through the class entry's symlink) once, not once
    per file: counters are most of what an InfiniBand collection reads (376 of the 439
    files of a real H100's eight HCAs). Empty when the directory is missing or
    unreadable (as ``list_dir``); ReadFailed when the process is out of descriptors."""
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        raise_if_exhausted(exc, directory)
        return {}
    values: dict[str, int | None] = {}
    try:
        names = sorted(os.listdir(dir_fd))
        for name in names:
            try:
                fd = os.open(name, _FLAGS, dir_fd=dir_fd)
            except OSError:
                values[name] = None
                continue
            try:
                data = os.read(fd, _PAGE)
            except OSError:
                data = b""
            finally:
                os.close(fd)
            values[name] = value = _decimal(data)
            if value is not None and counter is not None:
                counter.count += 1
    except OSError as exc:
        raise_if_exhausted(exc, directory)
    finally:
        os.close(dir_fd)
    return values


class ReadFailed(OSError):
    """Reading failed for a reason that says nothing about the hardware (our descriptors or
    memory ran out; a directory we may not list): the source is in error, naming it, so no
    check takes what could not be read for what is not there."""


# Errors of the process, not of the file: every other read would fail the same way.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def os_error_text(exc: OSError) -> str:
    """``Permission denied (EACCES)``: the reason and the errno's name, which a person can
    search for; the path is the caller's to add."""
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"{exc.strerror or exc} ({name})" if name else str(exc.strerror or exc)


def _read_failed(exc: OSError, path: str | os.PathLike[str]) -> ReadFailed:
    return ReadFailed(exc.errno, f"{os_error_text(exc)} reading {path}")


def raise_if_exhausted(exc: OSError, path: str | os.PathLike[str]) -> None:
    """ReadFailed naming ``exc`` and ``path`` when it is the process that ran out
    (EMFILE, ENFILE, ENOMEM, ENOBUFS): the source is in error, not the one file."""
    if exc.errno in _EXHAUSTED:
        raise _read_failed(exc, path) from None


def read_text(path: str | os.PathLike[str], counter: FileCounter | None = None,
              limit: int = 1 << 20, dir_fd: int | None = None) -> Read:
    """The file's text, or None and why; ReadFailed when the process itself is out of
    descriptors or memory. ``dir_fd``: ``path`` is relative to that open directory, so
    a scan of many files under one (every ``/proc/<pid>/stat``) walks its path once."""
    try:
        data = _read_regular(path, limit, dir_fd)
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            raise _read_failed(exc, path) from None
        return None, read_reason(exc)
    if counter is not None:
        counter.count += 1
    return data.decode("utf-8", errors="replace").strip(), None


MISSING = "missing"


def read_bytes(path: str | os.PathLike[str], limit: int) -> tuple[bytes | None, str | None]:
    """Up to ``limit`` bytes of a binary attribute (``vpd``, ``config``), or None and why;
    the process running out of descriptors or memory is a reason too, never raised: the
    caller may be a thread with nobody to catch it."""
    try:
        return _read_regular(path, limit), None
    except OSError as exc:
        return None, read_reason(exc)


def read_reason(exc: OSError) -> str:
    """Why a read failed, as the readers here say it ("missing", "is a directory", ...)."""
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return MISSING
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    if exc.strerror == _NOT_REGULAR:  # ours, not the kernel's EINVAL
        return _NOT_REGULAR
    return os_error_text(exc)


_REFUSED = frozenset({MISSING, _NOT_REGULAR, "is a directory"})


def unreadable(reason: str | None) -> bool:
    """Whether ``read_text``'s reason is a file that is there but that the OS would not
    let us read (EACCES, EIO, ...): our trouble, to be reported as an error naming it,
    never read as the absence of what it holds. An absent file is not, nor a FIFO or a
    directory standing where a file belongs (refused unread, like garbage in it)."""
    return reason is not None and reason not in _REFUSED


def present(path: str | os.PathLike[str]) -> tuple[bool, str | None]:
    """Whether ``path`` is a regular file, and why that could not be told (EACCES on a
    directory above it, EIO) when it could not: then it is neither there nor absent."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False, None
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            raise _read_failed(exc, path) from None
        return False, os_error_text(exc)
    return stat.S_ISREG(info.st_mode), None


def list_readable(path: str | os.PathLike[str]) -> tuple[list[str], str | None]:
    """Entries of a directory, sorted, and why it could not be listed when it is there
    but unlistable (an absent one is empty with no reason); ReadFailed when the process
    is out of descriptors."""
    try:
        return sorted(os.listdir(path)), None
    except (FileNotFoundError, NotADirectoryError):
        return [], None
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            raise _read_failed(exc, path) from None
        return [], os_error_text(exc)


def parse_int(text: str | None, base: int = 0) -> tuple[int | None, str | None]:
    if text is None:
        return None, "missing"
    words = text.split(None, 1)
    word = words[0] if words else ""
    if "_" in word:  # Python reads 1_000 as a number; the kernel never writes one
        return None, f"garbage {text[:40]!r}"
    try:
        value = int(word, base)
    except ValueError:  # also for decimals past Python's 4300-digit limit
        return None, f"garbage {text[:40]!r}"
    # Kernel attributes are at most 64 bits wide; a longer number is junk, and one past
    # the digit limit could not even be written out as JSON.
    if not -(1 << 63) <= value < 1 << 64:
        return None, f"garbage {text[:40]!r} (beyond 64 bits)"
    return value, None


def read_int(path: str | os.PathLike[str], counter: FileCounter | None = None, base: int = 0
             ) -> tuple[int | None, str | None]:
    text, reason = read_text(path, counter)
    if text is None:
        return None, reason
    return parse_int(text, base)


def list_dir(path: str | os.PathLike[str]) -> list[str]:
    """Entries of a directory, sorted; empty when it is missing or unreadable (a detail
    the collector can do without); ReadFailed when the process is out of descriptors."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        if exc.errno in _EXHAUSTED:
            raise _read_failed(exc, path) from None
        return []


def list_present(path: str | os.PathLike[str]) -> list[str]:
    """Entries of a directory whose entries are counted (PCI devices, RDMA devices, ports):
    empty only when it does not exist; any other error is ReadFailed, because an empty
    list here would read as hardware that is missing."""
    try:
        return sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _read_failed(exc, path) from None


_BDF_LEN = len("0000:00:00.0")


def bdf_path(real: str) -> list[str]:
    """The bdfs along a sysfs device path (resolved, or a link's target into
    /sys/devices), root port first."""
    return [p for p in real.split("/") if len(p) == _BDF_LEN and p[4] == ":" and p[7] == ":"]


def link_target(link: str) -> str:
    """Where a sysfs symlink points, as ``realpath`` would say it for what we read of it:
    a device's ``../../../devices/pci0000:00/...`` names its bridges, a ``driver`` link
    ends in the driver's name. One readlink, where ``realpath`` costs an lstat per
    component of the path, under a captured tree's root too: the collection reads ~60
    devices every cycle. A path that is not a link resolves the long way."""
    try:
        return os.readlink(link)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        return os.path.realpath(link)


def under(root: Path, absolute: str) -> Path:
    """``/sys/class/x`` under ``root``."""
    return root / absolute.lstrip("/")
