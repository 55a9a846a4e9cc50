"""What the agent keeps across restarts, written so that ``kill -9`` cannot corrupt it.

Every file is replaced whole: written to a temp file in the same directory, fsynced,
renamed over the old one, then the directory is fsynced so the rename itself survives a
power cut. A reader sees the old file or the new one, never half of either. A file that is
nevertheless unreadable (disk trouble, a hand edit) is renamed aside and logged: the
agent starts with what it can read, never crashes on its own state.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CollectError

log = logging.getLogger(__name__)

REPORT, AGENT, SNAPSHOT, EVENTS, CLEAR_DIR = (
    "report.json", "agent.json", "snapshot.json", "events.json", "clear")
MAX_EVENTS = 1000  # the oldest cleared events go first beyond this
# Ids name files under clear/: "." and ".." would name the directory or its parent.
ID_RE = re.compile(r"^(?!\.+$)[A-Za-z0-9._-]{1,80}$")
_TMP_PREFIX = ".tmp-"


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, separators=(",", ":")).encode())


def write_atomic(path: Path, body: bytes) -> None:
    tmp = path.with_name(f"{_TMP_PREFIX}{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
    try:
        try:
            _own_like_directory(fd, path.parent)
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        # A full disk fails mid-write: the partial temp file would hold on to the very
        # space the next attempt needs (and a tiny tmpfs would stay full for good).
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _own_like_directory(fd: int, directory: Path) -> None:
    """Root (``clusterdiag agent --clear`` with the agent stopped) writes the agent's files
    for it: owned by root, mode 0640, the agent (``User=clusterdiag``) could no longer read
    them. So a root writer gives each file to whoever owns the state directory."""
    if os.geteuid() != 0:
        return
    info = os.stat(directory)
    if (info.st_uid, info.st_gid) != (0, 0):
        os.fchown(fd, info.st_uid, info.st_gid)


def read_json(path: Path, must_read: bool = False) -> Any | None:
    """The file's JSON; None when absent. Corrupt: set aside, logged. Unreadable: logged,
    None; or, with ``must_read``, a start error when permission is denied, for a file
    whose loss starting without it would make permanent (the next save overwrites it)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        if must_read:
            raise CollectError(
                f"state file {path}: {exc.strerror}; the agent will not start without it "
                f"(it would overwrite it): give it to the state directory's owner "
                f"(chown --reference={path.parent} {path})") from None
        log.warning("state_unreadable", extra={"file": str(path), "error": exc.strerror})
        return None
    except OSError as exc:
        log.warning("state_unreadable", extra={"file": str(path), "error": exc.strerror})
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


@dataclass
class Events:
    """NVML XID events the agent recorded, in arrival order. An event is a dict: ``id``,
    ``xid``, ``gpu_index``, ``gpu_uuid``, ``time``, ``cleared`` (None, or why and when)."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def ids(self) -> set[str]:
        return {str(e["id"]) for e in self.items}

    def active(self) -> list[dict[str, Any]]:
        return [e for e in self.items if not e.get("cleared")]

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
    return (isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("xid"), int)
            and isinstance(e.get("time"), (int, float)))


class StateDir:
    """The agent's directory; created if missing, else the agent cannot run (exit 3)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o750)
            (path / CLEAR_DIR).mkdir(exist_ok=True, mode=0o750)
            probe = path / f"{_TMP_PREFIX}probe.{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise CollectError(f"state directory {path}: {exc.strerror or exc}") from None

    def sweep(self) -> None:
        """Temp files a killed writer left behind: never read, so only removed."""
        for tmp in self.path.glob(f"{_TMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                tmp.unlink()

    def write(self, name: str, data: Any) -> None:
        write_json_atomic(self.path / name, data)

    def write_bytes(self, name: str, body: bytes) -> None:
        write_atomic(self.path / name, body)

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
        write_json_atomic(self.path / CLEAR_DIR / event_id, {"at": time.time()})

    def take_clear_requests(self) -> list[str]:
        """Pending clear requests. The caller saves the events before removing a request
        with ``done_clear_request``: a crash in between applies it again, and clearing twice
        is harmless."""
        found = []
        try:
            names = sorted(os.listdir(self.path / CLEAR_DIR))
        except OSError:
            return []
        for name in names:
            if name.startswith(_TMP_PREFIX):
                continue
            if ID_RE.match(name):
                found.append(name)
        return found

    def done_clear_request(self, event_id: str) -> None:
        with contextlib.suppress(OSError):
            (self.path / CLEAR_DIR / event_id).unlink()
