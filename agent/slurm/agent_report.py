"""The daemon's latest report, read from its state directory when it is fresh enough.

The agent writes ``<state_dir>/report.json`` (``NodeReport.to_dict()``, atomically: temp
file, fsync, rename) after every collection and ``<state_dir>/agent.json``
(``{"interval_s", "pid", "listen"}``) at start. The prolog reads the file rather than
asking the agent's socket: a read is a few hundred microseconds with nothing to import
(no HTTP client, no token file to load), it works the same while the agent is busy
collecting, restarting or hung on a GPU (the last good report stays on disk, and its age
says how much to trust it), and the rename makes a torn read impossible.

Fresh means younger than ``max_age_s`` when configured, else two agent intervals,
counted from the end of the collection (``started_at`` + ``duration_s``).

The report is read into ``AgentReport``, what the prolog and the health check use of it,
not into ``NodeReport``, whose module loads the snapshot model: the prolog reads this
file on every node for every job.
"""

from __future__ import annotations

import json
import os
import re
import time

from ...checks.core.finding import Finding
from ..base.hostname import same_host
from ..base.safefile import read_regular

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import Any

    from ..settings.config import Config


class AgentReport:
    """The fields of the agent's report (``NodeReport.to_dict()``) that the Slurm programs
    read; ``from_dict`` refuses what ``NodeReport.from_dict`` refuses."""

    __slots__ = ("duration_s", "findings", "level", "node", "profile", "started_at")

    def __init__(self, node: str, profile: dict[str, Any], started_at: str,
                 duration_s: float, level: str, findings: list[Finding]) -> None:
        self.node = node
        self.profile = profile
        self.started_at = started_at
        self.duration_s = duration_s
        self.level = level
        self.findings = findings

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentReport:
        if "version" not in data:
            raise KeyError("version")
        for unread in ("inventory", "sources"):  # a NodeReport would refuse them
            dict(data.get(unread) or {})
        return cls(node=str(data["node"]), profile=dict(data["profile"]),
                   started_at=str(data["started_at"]), duration_s=float(data["duration_s"]),
                   level=str(data.get("level", "quick")),
                   findings=[Finding.from_dict(f) for f in data["findings"]])


class Cached:
    """``report`` is None when there is none to use; ``why`` says why, for the log."""

    __slots__ = ("age_s", "report", "why")

    def __init__(self, report: AgentReport | None, why: str,
                 age_s: float | None = None) -> None:
        self.report = report
        self.why = why
        self.age_s = age_s


# A dgx-h100 report is ~0.2 MB; far more is not the agent's, and must not cost the prolog
# its memory or its budget.
MAX_REPORT_BYTES = 16 << 20


def _read_json(path: str) -> Any:
    """Root reads a file in the service user's directory: no link followed, no FIFO
    waited on, nothing but a small regular file (safefile.py)."""
    return json.loads(read_regular(path, MAX_REPORT_BYTES))


def _interval(state_dir: str, default_s: float) -> float:
    try:
        value = _read_json(os.path.join(state_dir, "agent.json"))["interval_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return default_s
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default_s


# The reports' timestamps (reports/model/node.py writes ``datetime.isoformat()`` of a UTC time):
# date, time, optional fraction, and a UTC offset ("Z" too, which 3.10's fromisoformat
# cannot read).
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,6})?"
                    r"(Z|[+-]\d\d:\d\d)", re.ASCII)


def utc_seconds(stamp: str) -> float:
    """Seconds since the epoch of an ISO 8601 time with its UTC offset; ValueError for
    anything else, a time without an offset included (its zone would be a guess). Written
    here rather than asking ``datetime``: importing it is a fifteenth of the prolog's whole
    run with an agent report."""
    found = _STAMP.fullmatch(stamp) if isinstance(stamp, str) else None
    if found is None:
        raise ValueError(f"not an ISO 8601 time with a UTC offset: {str(stamp)[:40]!r}")
    year, month, day, hour, minute, second = (int(found[i]) for i in range(1, 7))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    month_days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    if not (1 <= month <= 12 and 1 <= day <= month_days[month - 1] and hour < 24
            and minute < 60 and second < 60):
        raise ValueError(f"no such time: {stamp[:40]!r}")
    # Days since 1970-01-01 of a proleptic Gregorian date (counted from March, so that the
    # leap day ends a year).
    shifted = year - (month <= 2)
    era, year_of_era = divmod(shifted, 400)
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    offset = found[8]
    offset_s = 0 if offset == "Z" else (
        (1 if offset[0] == "+" else -1) * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60))
    fraction = float(found[7]) if found[7] else 0.0
    return days * 86400 + hour * 3600 + minute * 60 + second + fraction - offset_s

def load_fresh(state_dir: str | os.PathLike[str], node: str, *, max_age_s: float | None,
               default_interval_s: float, now: float | None = None) -> Cached:
    now = time.time() if now is None else now
    state_dir = os.fspath(state_dir)
    path = os.path.join(state_dir, "report.json")
    try:
        data = _read_json(path)
    except FileNotFoundError:
        return Cached(None, f"no agent report at {path}")
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return Cached(None, f"agent report {path} unreadable: {type(exc).__name__}: {why}")
    try:
        report = AgentReport.from_dict(data)
        finished = utc_seconds(report.started_at) + report.duration_s
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Cached(None, f"agent report {path} malformed: {type(exc).__name__}: {exc}")
    age = now - finished
    limit = max_age_s if max_age_s is not None else 2 * _interval(state_dir, default_interval_s)
    if not same_host(report.node, node):
        return Cached(None, f"agent report is for node {report.node!r}, not {node!r}", age)
    if age > limit:
        return Cached(None, f"agent report is {age:.0f} s old (limit {limit:g} s)", age)
    if age < -60:
        return Cached(None, f"agent report is dated {-age:.0f} s in the future", age)
    return Cached(report, f"agent report {age:.1f} s old", age)


def load_trusted(config: Config, node: str) -> Cached:
    """The report as the prolog trusts it (``prolog.max_report_age_s``, else two agent
    intervals); the health check uses the same, to see what the next prolog will."""
    agent = config.section("agent")
    return load_fresh(agent["state_dir"], node,
                      max_age_s=config.section("prolog")["max_report_age_s"],
                      default_interval_s=float(agent["interval_s"]))
