"""Lines as a person saved them: launcher prefixes and quoting stripped, ``\\r`` progress
updates split, so each parser sees what the tool itself printed."""

from __future__ import annotations

import re

# srun --label " 0: ", Open MPI --tag-output "[1,0]<stdout>:", "[0]" interleaving,
# Kubernetes log timestamps, and "> " quoting of a pasted log.
_PREFIXES = (
    re.compile(r"^\s*\d+:\s"),
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),
    re.compile(r"^\[\d+\]\s"),
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s"),
    re.compile(r"^>\s?"),
)
# A web page's table rendering left " | |" after every line of one capture.
_TABLE_RESIDUE = re.compile(r"\s*\|\s*\|\s*$")


def strip_prefix(line: str) -> str:
    for pattern in _PREFIXES:
        match = pattern.match(line)
        if match:
            return line[match.end():]
    return line


def clean_lines(text: str) -> list[str]:
    """The text as lines without launcher prefixes; ``\\r`` starts a line too."""
    out = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        out.append(_TABLE_RESIDUE.sub("", strip_prefix(raw)).rstrip())
    return out


def number(token: str) -> float | None:
    """A figure as the tools print it (``89754``, ``1303.8``, ``1.0e+05``); None for
    ``N/A`` and anything else."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None
