"""The drain reason: one grammar, written by ``write`` and read by ``parse``, here only.

Every reason clusterdiag sets on a node (prolog, epilog, health check, ``qualify
--drain``, our own trouble under ``fail_closed``) is made by ``write`` from a ``Reason``,
and everything that decides from a node's reason (whether it is ours to replace, whether
the health check may resume the node) reads it with ``parse``; test_reason_writers.py
fails when another module spells the marker or a ``Reason=`` argument itself. The
grammar (docs/slurm.md, "The reason's grammar")::

    reason    ::= "clusterdiag:" [" " verb] [" " check " " component] [" " detail]
                  [" " more]
    verb      ::= "epilog" | "qualify" | "repair" | "error"
                                                    (none for the prolog and health check)
    check     ::= one word: a check id (nvlink.links_up), qualify's test (rails)
    component ::= one word: gpu3, mlx5_4/1, node
    detail    ::= one line of printable text: the observed figure, else the message
    more      ::= "(+" digits " more)"              the other problems left out

at most ``MAX_LENGTH`` characters. ``error`` names no check and no component.

The marker is how the health check knows a drain is its own to lift (NHC's ``NHC:``
convention): a reason without it was set by an operator, NHC or Slurm and is never
replaced or resumed. The check id comes first so ``sinfo -R`` groups nodes by problem.

The verb says what may return the node to service (``Reason.lift``). The prolog's and the
health check's reasons (no verb) are lifted once the named check passes again. The
epilog's saw something during a job (an Xid in the job's window, processes the job left)
that no later check can see again, and ``qualify``'s come from an active test no health
check runs: a person lifts those. ``repair`` holds a repeat offender (the same fault
family drained again and again: agent/health/lifecycle.py), its detail the count,
``clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)``: a person repairs the
node and lets it back through validation (``clusterdiag validate --release``). Our own
trouble (``error``) is lifted once clusterdiag can judge the node again. The health
check names no verb: its reason means what the prolog's does, and a word of its own
would rewrite the prolog's reason for the same fault on every pass and spend the 20
characters ``sinfo -R`` shows.

The text reaches ``scontrol`` as one argv element (scontrol.py: no shell), and is read
back by people in ``sinfo``, by our log and by the health check: ``Reason`` keeps every
field on one line of printable characters, with no double quote (see ``_INERT``), and
``write`` bounds the whole. Reasons written before this grammar (``clusterdiag:
nvlink.links_up gpu3 17/18 (down: 7)``, ``clusterdiag: epilog gpu.xid gpu1 Xid 79``,
``clusterdiag: error ...``) are the same grammar and parse to the same verb and check.
"""

from __future__ import annotations

import enum
import re

from ...checks.core.finding import Status

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ...checks.core.finding import Finding

PREFIX = "clusterdiag:"
# Slurm 22.05 stored a 2,000-character reason in our test, but `sinfo -R` shows 20 by
# default (sinfo(1), --list-reasons: "%20E %9u %19H %N") and slurmdbd keeps node events
# in a short text column: stay well inside.
MAX_LENGTH = 128
# A check id or component longer than this is not ours (the longest check id is 27
# characters): cut, it still leaves room for the detail.
MAX_WORD = 40


class Verb(enum.Enum):
    """The word after the marker: which program wrote the reason, where that changes what
    lifts it."""

    NONE = ""  # the prolog (own checks or the agent's report) and the health check
    EPILOG = "epilog"
    QUALIFY = "qualify"
    REPAIR = "repair"  # a repeat offender, held for a person to repair
    ERROR = "error"  # clusterdiag's own trouble under fail_closed: no check named

    @classmethod
    def of(cls, program: str | None) -> Verb:
        """The verb of an entry point's reasons (``prolog``, ``healthcheck`` -> none)."""
        return next((v for v in cls if v.value and v.value == program), cls.NONE)


class Lift(enum.Enum):
    """What may return a node drained with a reason to service."""

    CHECK = "check"  # the check the reason names passes again
    CLEAN = "clean"  # a pass with no fail and no error: clusterdiag can judge the node again
    PERSON = "person"  # nothing clusterdiag runs by itself can see it again


_WORDS = frozenset(v.value for v in Verb if v.value)
_MORE = re.compile(r"(?:(.*) )?\(\+(\d{1,9}) more\)")
_MAX_MORE = 10**9 - 1
# scontrol drops a reason's closing double quote (SchedMD/slurm src/scontrol/update_node.c,
# scontrol_update_node(), the "Reason" tag), which would change the text read back; it
# splits the argument at its first "=" only, so "=" in the text is kept.
_INERT = str.maketrans({'"': "'"})


def _line(text: str) -> str:
    """One line of printable characters: control, format (bidi) and separator characters
    become spaces, runs of spaces one."""
    printable = "".join(c if c.isprintable() else " " for c in str(text).translate(_INERT))
    return " ".join(printable.split())


def _word(text: str) -> str:
    word = _line(text).replace(" ", "_")
    return word if len(word) <= MAX_WORD else word[:MAX_WORD - 3] + "..."


class Reason:
    """One of our reasons, fields made inert: ``check`` is None for ``error`` (and for a
    bare marker); ``more`` counts the other problems. A check id spelled like a verb gets
    a ``?`` so it cannot be read back as one. Plain rather than a dataclass: the prolog
    imports this on every job (entry.py)."""

    __slots__ = ("check", "component", "detail", "more", "verb")

    def __init__(self, verb: Verb, check: str | None, component: str = "", detail: str = "",
                 more: int = 0) -> None:
        detail = _line(detail)
        while counted := _MORE.fullmatch(detail):  # it would read back as ``more``
            detail, more = counted[1] or "", more + int(counted[2])
        word = None
        if check is not None and verb is not Verb.ERROR:
            word = _word(check) or "?"
            word += "?" if word in _WORDS else ""
        elif (component or detail) and verb is not Verb.ERROR:
            raise ValueError("a reason that names no check can say nothing more")
        self.verb = verb
        self.check = word
        self.component = (_word(component) or "node") if word else ""
        self.detail = detail
        self.more = min(max(0, int(more)), _MAX_MORE)

    @property
    def lift(self) -> Lift:
        if self.verb in (Verb.EPILOG, Verb.QUALIFY, Verb.REPAIR):
            return Lift.PERSON
        return Lift.CHECK if self.check is not None and self.verb is Verb.NONE else Lift.CLEAN

    def _key(self) -> tuple[Verb, str | None, str, str, int]:
        return (self.verb, self.check, self.component, self.detail, self.more)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reason):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Reason({self.verb}, {self.check!r}, {self.component!r}, {self.detail!r}, "
                f"more={self.more})")


def write(reason: Reason) -> str:
    """The text for ``scontrol update ... Reason=``: the grammar above, within MAX_LENGTH
    (the detail cut with ``...``; the words are bounded by MAX_WORD, so it always fits)."""
    head = " ".join(w for w in (PREFIX, reason.verb.value, reason.check or "",
                                reason.component) if w)
    tail = f" (+{reason.more} more)" if reason.more else ""
    detail = f" {reason.detail}" if reason.detail else ""
    if len(head) + len(detail) + len(tail) > MAX_LENGTH:
        detail = detail[:MAX_LENGTH - len(head) - len(tail) - 3].rstrip() + "..."
    return head + detail + tail


def parse(text: str | None) -> Reason | None:
    """The reason ``write`` made (or an older clusterdiag); None when it is not ours."""
    text = (text or "").strip()
    if not text.startswith(PREFIX):  # before any cleaning: an operator's stays theirs
        return None
    body = _line(text[len(PREFIX):])
    first, _, after = body.partition(" ")
    verb = Verb(first) if first in _WORDS else Verb.NONE
    if verb is not Verb.NONE:
        body = after
    if verb is Verb.ERROR:
        return Reason(verb, None, detail=body)  # the constructor reads ``more`` off the end
    check, _, body = body.partition(" ")
    component, _, body = body.partition(" ")
    return Reason(verb, check or None, component, body)


def owned(text: str | None) -> bool:
    """True when clusterdiag set this reason (or there is none to protect)."""
    return text is None or not text.strip() or parse(text) is not None


def from_findings(findings: Iterable[Finding], statuses: Iterable[Status] = (Status.FAIL,),
                  program: str | None = None) -> Reason | None:
    """The reason for the first finding of the given statuses (fails first, then by check
    and component), counting the others; None when there is none. ``program`` is the
    entry point (``Verb.of``)."""
    wanted = tuple(statuses)
    picked = sorted((f for f in findings if f.status in wanted),
                    key=lambda f: (wanted.index(f.status), f.check, f.component))
    if not picked:
        return None
    first = picked[0]
    return Reason(Verb.of(program), first.check, first.component, first.brief(),
                  len(picked) - 1)


def from_error(error: str) -> Reason:
    """clusterdiag could not judge the node and ``fail_closed`` says drain it."""
    return Reason(Verb.ERROR, None, detail=error)
