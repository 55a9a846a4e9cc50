"""Playing the agent's unprivileged user: the tests that run clusterdiag as ``nobody``
(standing in for ``User=clusterdiag``) while the suite runs as root."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache

NOBODY = 65534


def as_nobody(*argv: str) -> list[str]:
    """``argv`` run as nobody, with no supplementary groups."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


@cache
def why_nobody_cannot_run_clusterdiag() -> str | None:
    """Why these tests cannot play nobody here: not root, or an interpreter or checkout that
    user cannot read (pyenv's Python lives under /root, mode 700, and its libpython is then
    not found; a checkout in a root-only directory cannot be imported). None when it can."""
    if os.geteuid() != 0:
        return "needs root to play both users"
    probe = subprocess.run(as_nobody(sys.executable, "-c", "import clusterdiag.agent.launch"),
                           capture_output=True, text=True, timeout=60, check=False, cwd="/")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1][-200:]
        return (f"the unprivileged user cannot run {sys.executable} with this checkout "
                f"(exit {probe.returncode}: {last}): install Python and the checkout where "
                "every user can read them to run this test")
    return None
