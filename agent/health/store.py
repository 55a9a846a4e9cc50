"""``health.json`` in the agent's state directory: the lifecycle (lifecycle.py) on disk.

The same rules as the agent's other state files (agent/daemon/state.py): replaced whole
(agent/base/atomic.py: temp file, fsync, rename, directory fsync), read without following
a link or blocking on a FIFO and never beyond ``MAX_BYTES`` (agent/base/safefile.py), and
validated field by field on load, since anyone who can write the directory could plant
it. A file that is not a valid lifecycle is set aside and logged, and the node starts
from a fresh state: never a crash. Written by ``clusterdiag validate``, the health check
and the gate's drains (agent/slurm/incidents.py); the agent only reads it, when it
changed (``HealthFile``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from ..base.atomic import write_atomic
from ..base.inert import shown
from ..base.safefile import describe, read_regular
from . import lifecycle
from .lifecycle import MAX_FAMILIES, MAX_INCIDENTS, Asked, Health, Incident, Outcome, Result, State

log = logging.getLogger("clusterdiag.health")

NAME = "health.json"
VERSION = 1
# 64 incidents of a few hundred characters, 128 family totals: well under this.
MAX_BYTES = 256 << 10
MAX_WORD = 80  # a family, check or component
MAX_TEXT = 512  # evidence, a validation's detail


class Corrupt(ValueError):
    """What in the file is not a lifecycle, in words."""


def _word(data: Any, key: str, limit: int = MAX_WORD) -> str:
    value = data.get(key)
    if not isinstance(value, str) or len(value) > limit:
        raise Corrupt(f"{key}: not a string of at most {limit} characters")
    return shown(value)


def _time(data: Any, key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise Corrupt(f"{key}: not a time")
    return float(value)


# ``fleet`` on disk: true, false, or "unknown" (the fleet could not be read); a file
# written before the field existed has none, and its drains were each the node's own.
_FLEET: dict[Any, bool | None] = {True: True, False: False, "unknown": None}
_FLEET_OUT = {v: k for k, v in _FLEET.items()}


def _fleet(data: Any) -> bool | None:
    value = data.get("fleet", False)
    if not isinstance(value, (bool, str)) or value not in _FLEET:
        raise Corrupt("fleet: not true, false or \"unknown\"")
    return _FLEET[value]


def _incident(data: Any) -> Incident:
    if not isinstance(data, dict):
        raise Corrupt("an incident is not an object")
    return Incident(_word(data, "family"), _word(data, "check"), _word(data, "component"),
                    _word(data, "evidence", MAX_TEXT), _time(data, "at"), _fleet(data))


def _enum(kind: type[State] | type[Result] | type[lifecycle.Basis], value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise Corrupt(f"{value!r:.40}: not a {kind.__name__.lower()}") from None


def from_dict(data: Any) -> Health:
    """A lifecycle from its JSON, every field checked; Corrupt says what is wrong."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise Corrupt(f"not a version {VERSION} health file")
    state = _enum(State, data.get("state"))
    opened = data.get("open")
    incidents = data.get("incidents")
    totals = data.get("totals")
    if not isinstance(incidents, list) or len(incidents) > MAX_INCIDENTS:
        raise Corrupt(f"incidents: not a list of at most {MAX_INCIDENTS}")
    if not isinstance(totals, dict) or len(totals) > MAX_FAMILIES or not all(
            isinstance(k, str) and len(k) <= MAX_WORD and type(v) is int and v >= 0
            for k, v in totals.items()):
        raise Corrupt("totals: not counts by family")
    last = data.get("last")
    outcome = None
    if last is not None:
        if not isinstance(last, dict):
            raise Corrupt("last: not an object")
        outcome = Outcome(_enum(Result, last.get("result")), _word(last, "detail", MAX_TEXT),
                          _time(last, "at"), _reading(last.get("reading")))
    health = Health(state, _time(data, "since"),
                    None if opened is None else _incident(opened),
                    [_incident(i) for i in incidents],
                    {shown(k): v for k, v in totals.items()}, outcome, _errors(data),
                    _asked(data.get("asked")))
    if (health.open is None) != (state is State.HEALTHY):
        raise Corrupt(f"state {state.value} with{'out' if health.open is None else ''} "
                      "an open incident")
    return health


def _reading(data: Any) -> lifecycle.Reading | None:
    """A failure's figure; absent for an outcome with none, and in a file written before
    figures were kept."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise Corrupt("reading: not an object")
    try:
        return lifecycle.Reading(_word(data, "check"), _word(data, "component"),
                                 _word(data, "message", MAX_TEXT), _figure(data, "observed"),
                                 _figure(data, "expected"), _word(data, "unit"),
                                 _enum(lifecycle.Basis, data.get("basis")))
    except ValueError as exc:  # Reading's own checks: a unit, a figure in bounds
        raise Corrupt(f"reading: {exc}") from None


def _figure(data: Any, key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Corrupt(f"{key}: not a number")
    return float(value)


def _reading_dict(r: lifecycle.Reading | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"check": r.check, "component": r.component, "message": r.message[:MAX_TEXT],
            "observed": r.observed, "expected": r.expected, "unit": r.unit,
            "basis": r.basis.value}


def _errors(data: dict[str, Any]) -> int:
    """Absent in a file written before the count was kept: none."""
    value = data.get("errors", 0)
    if type(value) is not int or not 0 <= value <= lifecycle.MAX_ERRORS:
        raise Corrupt(f"errors: not a count of at most {lifecycle.MAX_ERRORS}")
    return value


def _asked(data: Any) -> Asked | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("idle"), bool):
        raise Corrupt("asked: not a time and whether the node was in service")
    return Asked(_time(data, "at"), data["idle"])


def _incident_dict(i: Incident) -> dict[str, Any]:
    return {"family": i.family, "check": i.check, "component": i.component,
            "evidence": i.evidence[:MAX_TEXT], "at": i.at, "fleet": _FLEET_OUT[i.fleet]}


def to_dict(health: Health) -> dict[str, Any]:
    last = health.last
    return {"version": VERSION, "state": health.state.value, "since": health.since,
            "open": None if health.open is None else _incident_dict(health.open),
            "incidents": [_incident_dict(i) for i in health.incidents],
            "totals": dict(sorted(health.totals.items())),
            "last": None if last is None else {"result": last.result.value,
                                               "detail": last.detail, "at": last.at,
                                               "reading": _reading_dict(last.reading)},
            "errors": health.errors,
            "asked": None if health.asked is None else {"at": health.asked.at,
                                                        "idle": health.asked.idle}}


def body(health: Health) -> bytes:
    return json.dumps(to_dict(health), separators=(",", ":")).encode()


def load(state_dir: Path) -> Health:
    """The node's lifecycle; a fresh (healthy) one when there is no file, and when the
    file cannot be read or is not a lifecycle (logged; a corrupt file is set aside)."""
    path = state_dir / NAME
    try:
        text = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        return Health()
    except OSError as exc:
        log.error("health_state_unreadable: %s: %s; starting from a healthy state", path,
                  describe(exc))
        return Health()
    try:
        return from_dict(json.loads(text))
    except (ValueError, RecursionError) as exc:  # Corrupt is a ValueError, as JSON's are
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        log.error("health_state_corrupt: %s (%s) moved to %s; starting from a healthy state",
                  path, str(exc)[:120], aside)
        return Health()


def save(state_dir: Path, health: Health) -> None:
    """Replace the file whole (OSError when the directory refuses)."""
    write_atomic(state_dir / NAME, body(health))


class HealthFile:
    """The agent's view of ``health.json``: read again only when the file changed (its
    inode, size or modification time), so a scrape or a request costs one ``stat``. The
    agent never sets a corrupt file aside: that is for the writer (``load``)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / NAME
        self._stamp: tuple[int, int, int] | None = None
        self._health = Health()

    def stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def current(self) -> Health:
        stamp = self.stamp()
        if stamp != self._stamp:
            self._stamp, self._health = stamp, self._read() if stamp is not None else Health()
        return self._health

    def _read(self) -> Health:
        try:
            return from_dict(json.loads(read_regular(self.path, MAX_BYTES)))
        except FileNotFoundError:
            return Health()
        except (OSError, ValueError, RecursionError) as exc:
            log.error("health_state_unusable: %s: %s; serving a healthy state", self.path,
                      describe(exc) if isinstance(exc, OSError) else str(exc)[:120])
            return Health()
