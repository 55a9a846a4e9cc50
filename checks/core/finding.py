"""The Finding: one judgement about one component, in a form that groups across nodes.

The Slurm prolog reads findings from the agent's report on every node for every job, so
this module imports nothing but ``enum`` (which ``json`` loads anyway): ``Finding`` is a
plain class rather than a dataclass, since importing ``dataclasses`` alone costs as much
as starting the interpreter.
"""

from __future__ import annotations

import enum
import sys

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import Any

_MAX_BRIEF = 40  # characters of an observed value that still read as a few words

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:
    class StrEnum(str, enum.Enum):
        """Python 3.10 has no ``enum.StrEnum``; this keeps ``str()`` and ``format()`` equal to
        the value, as 3.11's does, so reports are the same on every version."""

        def __str__(self) -> str:
            return str(self.value)


class Status(StrEnum):
    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    ERROR = "error"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        # skip never hides pass in a verdict; error ("could not tell") is below a definite fail.
        return _RANK[self]


_RANK = {Status.SKIP: 0, Status.PASS: 1, Status.WARN: 2, Status.ERROR: 3, Status.FAIL: 4}


def worst(statuses: Any) -> Status:
    """The worst status of an iterable of statuses (SKIP when empty)."""
    result = Status.SKIP
    for status in statuses:
        if status.rank > result.rank:
            result = status
    return result


class Action(StrEnum):
    NONE = "none"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    DRAIN = "drain"
    RMA = "rma"
    RESEAT_CABLE = "reseat_cable"
    FIX_CONFIG = "fix_config"
    INVESTIGATE = "investigate"


_FIELDS = ("status", "component", "message", "observed", "expected", "action", "check")


class Finding:
    """``message`` is stable text with no per-node noise (no counts that differ between
    nodes, no timestamps): identical problems must group across a cluster. Numbers go in
    ``observed``/``expected``.

    Immutable and compared by value, as a frozen dataclass would be; ``replace`` returns
    a copy with some fields changed (``dataclasses.replace`` does not apply here)."""

    __slots__ = _FIELDS
    __match_args__ = ("status", "component", "message", "observed", "expected", "action",
                      "check")

    status: Status
    component: str
    message: str
    observed: Any
    expected: Any
    action: Action
    check: str

    def __init__(self, status: Status, component: str, message: str, observed: Any = None,
                 expected: Any = None, action: Action = Action.NONE, check: str = "") -> None:
        for name, value in zip(_FIELDS, (status, component, message, observed, expected,
                                         action, check), strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def replace(self, **changes: Any) -> Finding:
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"Finding has no field {', '.join(sorted(unknown))}")
        return Finding(**{name: changes.get(name, getattr(self, name)) for name in _FIELDS})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Finding is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: a Finding is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"Finding({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Finding, self._values())

    @classmethod
    def passed(cls, component: str, message: str, observed: Any = None,
               expected: Any = None) -> Finding:
        return cls(Status.PASS, component, message, observed, expected)

    @classmethod
    def skip(cls, component: str, message: str, observed: Any = None) -> Finding:
        """Not judged here, and why; ``observed`` is what was read (an NVML reason such as
        ``NotSupported``), where anything was."""
        return cls(Status.SKIP, component, message, observed)

    @classmethod
    def warn(cls, component: str, message: str, observed: Any = None, expected: Any = None,
             action: Action = Action.INVESTIGATE) -> Finding:
        return cls(Status.WARN, component, message, observed, expected, action)

    @classmethod
    def fail(cls, component: str, message: str, observed: Any = None, expected: Any = None,
             action: Action = Action.INVESTIGATE) -> Finding:
        return cls(Status.FAIL, component, message, observed, expected, action)

    @classmethod
    def error(cls, component: str, message: str, observed: Any = None) -> Finding:
        """The check could not tell: the evidence was missing or unreadable. ``observed``
        says what was read instead (the error a read returned), so the report names the
        cause."""
        return cls(Status.ERROR, component, message, observed, action=Action.INVESTIGATE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status.value,
            "component": self.component,
            "message": self.message,
            "observed": self.observed,
            "expected": self.expected,
            "action": self.action.value,
        }

    def brief(self) -> str:
        """The finding in a few words after its check id and component, for one-line
        outputs (a drain reason, ``--format line``): the observed value when it is short
        and plain (``17/18``), else the message."""
        observed = self.observed
        if isinstance(observed, (str, int, float)) and not isinstance(observed, bool):
            text = str(observed).strip()
            if text and len(text) <= _MAX_BRIEF and "\n" not in text:
                return text
        return self.message

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            status=Status(data["status"]),
            component=str(data["component"]),
            message=str(data["message"]),
            observed=data.get("observed"),
            expected=data.get("expected"),
            action=Action(data.get("action", "none")),
            check=str(data.get("check", "")),
        )
