"""Lines as a person saved them: launcher prefixes and quoting stripped, ``\\r`` progress
updates split, so each parser sees what the tool itself printed."""

from __future__ import annotations

import re

# srun --label " 0: ", Open MPI --tag-output "[1,0]<stdout>:", "[0]" interleaving,
# torchrun's "[rank3]:" ("[default0]:" with --tee), Kubernetes log timestamps, a job
# script's "[2026-06-23 15:45:07] ", and "> " quoting of a pasted log.
_PREFIXES = (
    re.compile(r"^\s*\d+:\s"),
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),
    re.compile(r"^\[\d+\]\s"),
    re.compile(r"^\[(?:rank|default)\d+\]:\s?"),
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s"),
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s?"),
    re.compile(r"^>\s?"),
)
_MAX_PREFIXES = 4  # a timestamp, then a rank label, then quoting: never a loop
# A web page's table rendering left " | |" after every line of one capture.
_TABLE_RESIDUE = re.compile(r"\s*\|\s*\|\s*$")


def strip_prefix(line: str) -> str:
    """The line without the prefixes launchers and pastes put before it, however many are
    stacked (a job script's timestamp before srun's rank label)."""
    for _ in range(_MAX_PREFIXES):
        match = next((m for p in _PREFIXES if (m := p.match(line))), None)
        if match is None or not match.end():
            break
        line = line[match.end():]
    return line


def clean_lines(text: str) -> list[str]:
    """The text as lines without launcher prefixes; ``\\r`` starts a line too."""
    return [line for _, line in numbered_lines(text)]


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """:func:`clean_lines` with each line's number in the text as an editor counts it
    (``\\n`` only): a progress update after ``\\r`` (gpu_burn's) keeps its line's number, so
    ``file:line`` in a finding is where a person finds it."""
    out = []
    for number_, full in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        for raw in full.split("\r"):
            out.append((number_, _TABLE_RESIDUE.sub("", strip_prefix(raw)).rstrip()))
    return out


# A number as C's printf writes one, ``nan``/``inf`` and signs included: what a parser must
# read, not skip, so that an impossible figure is seen (checks/qualify/sanity.py).
NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"


def reading(token: str) -> float | None:
    """A figure as the tool printed it, impossible ones included (``-1``, ``nan``, ``-nan``,
    ``inf``, ``1e308``); None only for what is no number (``N/A``)."""
    try:
        return float(token)
    except ValueError:
        return None


def plausible(value: float) -> bool:
    """Whether a reading could be a measurement at all: finite and not negative."""
    return value == value and 0.0 <= value < float("inf")


def pick(values: list[float]) -> float:
    """The best of several readings of one figure, unless one of them is no measurement at
    all: that one is kept, never hidden behind a good one (sanity.py makes it an error)."""
    return next((v for v in values if not plausible(v)), max(values))


def number(token: str) -> float | None:
    """A figure as the tools print it (``89754``, ``1303.8``, ``1.0e+05``); None for
    ``N/A`` and anything else."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None
