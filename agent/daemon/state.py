"""What the agent keeps across restarts, written so that ``kill -9`` cannot corrupt it.

Every file is replaced whole: written to a temp file in the same directory, fsynced,
renamed over the old one, then the directory is fsynced so the rename itself survives a
power cut. A reader sees the old file or the new one, never half of either. A file that is
nevertheless unreadable (disk trouble, a hand edit) is renamed aside and logged: the
agent starts with what it can read, never crashes on its own state.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.atomic import TMP_PREFIX, write_atomic, write_in
from ..base.errors import CollectError
from ..base.safefile import describe, read_regular

log = logging.getLogger(__name__)

REPORT, AGENT, SNAPSHOT, EVENTS, CLEAR_DIR = (
    "report.json", "agent.json", "snapshot.json", "events.json", "clear")
MAX_EVENTS = 1000  # the oldest cleared events go first beyond this
# An event's kind: an NVML XID (the listener's), or a hardware error record of the
# previous boot (read at the agent's start); files written before kinds have only XIDs.
XID, CPER = "xid", "cper"
MAX_MESSAGE_CHARS = 8192  # a record's text, as the kernel-log parser bounds it
# Ids name files under clear/: "." and ".." would name the directory or its parent.
ID_RE = re.compile(r"^(?!\.+$)[A-Za-z0-9._-]{1,80}$")
# How long after a change of ``clear/`` it is listed every time all the same (take_clear_requests).
_SETTLE_NS = 2_000_000_000
# The largest state file read back: a dgx-h100 snapshot is ~0.2 MB, 1,000 events ~0.2 MB.
MAX_STATE_BYTES = 32 << 20


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


def read_json(path: Path, must_read: bool = False) -> Any | None:
    """The file's JSON; None when absent. Corrupt: set aside, logged. Unreadable (also a
    link, a FIFO or anything but a regular file, or beyond MAX_STATE_BYTES): logged, None;
    or, with ``must_read``, a start error, for a file whose loss starting without it would
    make permanent (the next save overwrites it)."""
    try:
        text = read_regular(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if must_read:
            fix = (f"give it to the state directory's owner (chown --reference={path.parent} "
                   f"{path})" if isinstance(exc, PermissionError)
                   else "move it aside if it is not the agent's")
            raise CollectError(
                f"state file {path}: {describe(exc)}; the agent will not start without it "
                f"(it would overwrite it): {fix}") from None
        log.warning("state_unreadable", extra={"file": str(path), "error": describe(exc)})
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        log.warning("state_corrupt", extra={"file": str(path), "moved_to": str(aside),
                                            "error": str(exc)[:120]})
        return None


def check_dir(where: Path, info: os.stat_result, owner: int | None) -> None:
    """A directory the agent acts in: written by its owner only, and owned by ``owner``
    (by the agent's user when None; root may act in the service user's directory, through
    descriptors and without following links)."""
    if info.st_mode & 0o022:
        raise CollectError(f"state directory {where}: writable by group or others (mode "
                           f"{stat.S_IMODE(info.st_mode):04o}); chmod 750 it")
    want = owner if owner is not None else (None if os.geteuid() == 0 else os.geteuid())
    if want is not None and info.st_uid != want:
        raise CollectError(f"state directory {where}: owned by uid {info.st_uid}, not by "
                           f"uid {want}; chown it to the agent's user")


@dataclass
class Events:
    """Events the agent recorded, in arrival order. An NVML XID event is a dict: ``id``,
    ``xid``, ``gpu_index``, ``gpu_uuid``, ``time``, ``cleared`` (None, or why and when);
    a previous boot's record has ``kind`` ``cper`` and its ``message`` instead
    (daemon/boot_records.py)."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def ids(self) -> set[str]:
        return {str(e["id"]) for e in self.items}

    def active(self) -> list[dict[str, Any]]:
        return [e for e in self.items if not e.get("cleared")]

    def active_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.active() if e.get("kind", XID) == kind]

    def add(self, event: dict[str, Any]) -> bool:
        if event["id"] in self.ids():
            return False
        self.items.append(event)
        while len(self.items) > MAX_EVENTS:
            cleared = next((e for e in self.items if e.get("cleared")), self.items[0])
            self.items.remove(cleared)
        return True

    def clear(self, event_id: str, why: str) -> list[str]:
        """Mark ``event_id`` (or every active event for ``all``) cleared; the ids cleared."""
        done = []
        for e in self.active():
            if event_id in ("all", e["id"]):
                e["cleared"] = {"why": why, "at": time.time()}
                done.append(str(e["id"]))
        return done


def _valid_event(e: Any) -> bool:
    """An XID event (no ``kind``: files written before there were others), or a previous
    boot's hardware error record (daemon/boot_records.py) whose text stays bounded."""
    if not (isinstance(e, dict) and isinstance(e.get("id"), str)
            and isinstance(e.get("time"), (int, float))):
        return False
    kind = e.get("kind", XID)
    if kind == XID:
        return isinstance(e.get("xid"), int)
    return kind == CPER and isinstance(e.get("message"), str) \
        and len(e["message"]) <= MAX_MESSAGE_CHARS


class StateDir:
    """The agent's directory; created if missing, else the agent cannot run (exit 3).

    It must be a directory only its owner writes, owned by the agent's user, and so must
    ``clear/`` in it (a real directory, never a link: checked with ``lstat``). Everything
    inside is reached through descriptors of these two directories, so a link swapped in
    after the start check leads nowhere."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._clear_path = os.path.join(path, CLEAR_DIR)
        self._clear_seen: tuple[int, int, int, int] | None = None
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o750)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise CollectError(f"state directory {path}: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            check_dir(path, info, None)
            self._identity = (info.st_dev, info.st_ino)
            self.owner = info.st_uid
            self._make_clear_dir(fd, info)
            with self._clear_fd(fd):
                pass
            probe = f"{TMP_PREFIX}probe.{secrets.token_hex(8)}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600, dir_fd=fd))
            os.unlink(probe, dir_fd=fd)
        except OSError as exc:
            raise CollectError(f"state directory {path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def _make_clear_dir(self, fd: int, info: os.stat_result) -> None:
        try:
            os.mkdir(CLEAR_DIR, 0o750, dir_fd=fd)
        except FileExistsError:
            return
        if os.geteuid() == 0 and info.st_uid != 0:  # root's --clear made it: the agent's
            os.chown(CLEAR_DIR, info.st_uid, info.st_gid, dir_fd=fd, follow_symlinks=False)

    @contextlib.contextmanager
    def _dir_fd(self) -> Iterator[int]:
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self._identity:
                raise CollectError(f"state directory {self.path}: replaced since the start")
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _clear_fd(self, dir_fd: int) -> Iterator[int]:
        where = self.path / CLEAR_DIR
        try:
            fd = os.open(CLEAR_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise CollectError(f"state directory {where}: not a directory (a link or a "
                                   "file); remove it, the agent makes its own") from None
            raise
        try:
            check_dir(where, os.fstat(fd), self.owner)
            yield fd
        finally:
            os.close(fd)

    def sweep(self) -> None:
        """Temp files a killed writer left behind: never read, so only removed."""
        for tmp in self.path.glob(f"{TMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                tmp.unlink()

    def write(self, name: str, data: Any) -> None:
        self.write_bytes(name, json.dumps(data, separators=(",", ":")).encode())

    def write_bytes(self, name: str, body: bytes) -> None:
        with self._dir_fd() as fd:
            write_in(fd, name, body)

    def read(self, name: str) -> Any | None:
        return read_json(self.path / name)

    def load_events(self) -> Events:
        data = read_json(self.path / EVENTS, must_read=True)
        if data is None:
            return Events()
        items = data.get("events") if isinstance(data, dict) else None
        if not isinstance(items, list):
            log.warning("state_corrupt", extra={"file": EVENTS, "error": "no events list"})
            return Events()
        good = [e for e in items if _valid_event(e)]
        if len(good) != len(items):
            log.warning("state_events_dropped", extra={"count": len(items) - len(good)})
        return Events(good)

    @staticmethod
    def events_body(events: Events) -> bytes:
        """Encoded where the events live (the event loop), written by the writer thread."""
        return json.dumps({"version": 1, "events": events.items}).encode()

    def save_events(self, events: Events) -> None:
        self.write_bytes(EVENTS, self.events_body(events))

    def request_clear(self, event_id: str) -> None:
        with self._dir_fd() as fd, self._clear_fd(fd) as clear_fd:
            write_in(clear_fd, event_id, json.dumps({"at": time.time()}).encode())

    def take_clear_requests(self) -> list[str]:
        """Pending clear requests: regular files of their own (one link, the directory
        owner's) named by an event id; anything else in ``clear/`` is logged and left. The
        caller saves the events before removing a request with ``done_clear_request``: a
        crash in between applies it again, and clearing twice is harmless.

        The agent asks every second, so ``clear/`` is listed only when its ``lstat``
        differs from that of the last listing that found nothing (a request, or a link
        or directory swapped in, changes it): listing it is a dozen system calls, ~15 %
        of an idle agent's CPU."""
        stamp = self._clear_stamp()
        if stamp is not None and stamp == self._clear_seen:
            return []
        found = self._list_clear_requests()
        self._clear_seen = stamp if found == [] else None  # not after a failed listing
        return found or []

    def _clear_stamp(self) -> tuple[int, int, int, int] | None:
        """``clear/``'s identity and times; None while they cannot tell a change: it cannot
        be looked at, or it changed within ``_SETTLE_NS`` (the kernel stamps times by its
        clock tick, so a request made just after a listing may leave them as they were)."""
        try:
            info = os.stat(self._clear_path, follow_symlinks=False)
        except OSError:
            return None
        if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < _SETTLE_NS:
            return None
        return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns

    def _list_clear_requests(self) -> list[str] | None:
        """The requests in ``clear/``, or None when it could not be listed (logged)."""
        found = []
        try:
            with self._dir_fd() as fd, self._clear_fd(fd) as clear_fd:
                for name in sorted(os.listdir(clear_fd)):
                    if name.startswith(TMP_PREFIX) or not ID_RE.match(name):
                        continue
                    info = os.stat(name, dir_fd=clear_fd, follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 \
                            and info.st_uid == self.owner:
                        found.append(name)
                    else:
                        log.warning("clear_request_refused", extra={
                            "file": name, "why": "not a regular file of its own, the owner's"})
        except (OSError, CollectError) as exc:
            log.warning("clear_dir_unusable", extra={"error": str(exc)[:200]})
            return None
        return found

    def done_clear_request(self, event_id: str) -> None:
        with contextlib.suppress(OSError, CollectError), self._dir_fd() as fd, \
                self._clear_fd(fd) as clear_fd:
            os.unlink(event_id, dir_fd=clear_fd)
