"""The drain reason: the worst finding in one short line that starts with ``clusterdiag:``.

The prefix is how the health check knows a drain is its own to lift (NHC's ``NHC:``
convention): a reason without it was set by an operator or by Slurm and is never
replaced or resumed. The text names the check id first so ``sinfo -R`` groups nodes by
problem, then the component and the observed value (``clusterdiag: nvlink.links_up gpu3
17/18 (down: 7)``).

The health check reads the check id back to resume only once that check passes again,
so two kinds of reason say more. The epilog's put ``epilog`` before the id (``clusterdiag:
epilog gpu.xid gpu1 Xid 79``): what it saw happened during a job (an Xid in the job's
window, processes the job left), which no later check can see again, so a person resumes
those. clusterdiag's own trouble under ``fail_closed`` names no check (``clusterdiag:
error ...``).
"""

from __future__ import annotations

from ...checks.core.finding import Status

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ...checks.core.finding import Finding

PREFIX = "clusterdiag:"
# Slurm 22.05 stored a 2,000-character reason in our test, but `sinfo -R` shows 20 by
# default and slurmdbd keeps node events in a short text column: stay well inside.
MAX_LENGTH = 128
EPILOG = "epilog"  # the program whose reasons are marked: see the module docstring
OWN_ERROR = "error"


class Parsed:
    """What one of our reasons says: the check that failed (None for our own error) and
    whether the epilog set it."""

    __slots__ = ("check", "epilog")

    def __init__(self, check: str | None, epilog: bool) -> None:
        self.check = check
        self.epilog = epilog

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Parsed):
            return NotImplemented
        return (self.check, self.epilog) == (other.check, other.epilog)

    def __hash__(self) -> int:
        return hash((self.check, self.epilog))

    def __repr__(self) -> str:
        return f"Parsed(check={self.check!r}, epilog={self.epilog!r})"


def parse(reason: str | None) -> Parsed | None:
    """None when the reason is not clusterdiag's."""
    text = (reason or "").strip()
    if not text.startswith(PREFIX):
        return None
    words = text[len(PREFIX):].split()
    epilog = bool(words) and words[0] == EPILOG
    if epilog:
        words = words[1:]
    check = words[0] if words and words[0] != OWN_ERROR else None
    return Parsed(check, epilog)


def owned(reason: str | None) -> bool:
    """True when clusterdiag set this reason (or there is none to protect)."""
    return reason is None or not reason.strip() or reason.lstrip().startswith(PREFIX)


def drain_reason(findings: Iterable[Finding], statuses: Iterable[Status] = (Status.FAIL,),
                 program: str | None = None) -> str | None:
    """The reason for the first finding of the given statuses (fails first), or None;
    marked when ``program`` is the epilog."""
    wanted = tuple(statuses)
    picked = sorted((f for f in findings if f.status in wanted),
                    key=lambda f: (wanted.index(f.status), f.check, f.component))
    if not picked:
        return None
    first = picked[0]
    where = "" if first.component in ("", "node") else f" {first.component}"
    origin = f" {EPILOG}" if program == EPILOG else ""
    text = f"{PREFIX}{origin} {first.check}{where} {first.brief()}"
    return clip(text, len(picked) - 1)


def clip(text: str, more: int = 0) -> str:
    """One line within MAX_LENGTH, saying how many other problems it leaves out."""
    text = " ".join(text.split())
    suffix = f" (+{more} more)" if more else ""
    if len(text) + len(suffix) > MAX_LENGTH:
        text = text[:MAX_LENGTH - len(suffix) - 3].rstrip() + "..."
    return text + suffix
