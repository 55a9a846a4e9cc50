"""``journalctl -k -b -1``: the previous boot's kernel log, as the agent asks for it at
its start (agent/collectors/previous_boot.py), from the simulated node's journal state.

Each line as ``-o short-iso-precise`` prints it (systemd src/shared/logs-show.c:
output_timestamp_realtime() "%Y-%m-%dT%H:%M:%S", ".%06u" and "%z", then output_short()'s
" HOSTNAME IDENTIFIER: MESSAGE"), in UTC. What journalctl says where there is nothing to
read is its own wording: "Data from the specified boot (-1) is not available: No such
boot ID in journal" and exit 1 (systemd 252, Debian 12, on an empty journal directory);
a run past its deadline is the runner's "no answer within" error.
"""

from __future__ import annotations

import itertools
import time

from ...read.sources import CommandResult
from ..state.hardware import SimNode

# The boot ended this long before the current one began (firmware, POST).
_REBOOT_S = 90.0


def _asks_previous_boot(args: list[str]) -> bool:
    """The previous boot's kernel log in the format the collector reads; other options
    (-n N, --no-pager, -D DIR) may come with it."""
    pairs = set(itertools.pairwise(args))
    return "-k" in args and ("-b", "-1") in pairs and ("-o", "short-iso-precise") in pairs


def _lines_wanted(args: list[str]) -> int | None:
    after = args[args.index("-n") + 1:][:1] if "-n" in args else []
    return int(after[0]) if after and after[0].isdigit() else None


def _stamp(when: float) -> str:
    usec = round(when * 1e6) % 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(when))) + f".{usec:06d}+0000"


def journalctl(node: SimNode, argv: list[str], timeout_s: float) -> CommandResult:
    """The form the agent asks (with ``-D DIR`` for a tree other than /); anything else
    is refused as not simulated."""
    if node.journal == "missing":
        return CommandResult(argv, None, error="journalctl: not found")
    if not _asks_previous_boot(argv[1:]):
        return CommandResult(argv, None, error=f"journalctl {' '.join(argv[1:])} is not "
                                                "simulated")
    if node.journal == "hang":
        return CommandResult(argv, None, error=f"journalctl: no answer within {timeout_s:g} s")
    if node.journal == "first_boot":
        return CommandResult(argv, 1, "", "Data from the specified boot (-1) is not available: "
                                          "No such boot ID in journal\n")
    ended = node.epoch - node.uptime_s - _REBOOT_S
    lines = [f"{_stamp(ended - age_s)} {node.name} kernel: {message}\n"
             for age_s, message in sorted(node.previous_boot_lines, key=lambda x: -x[0])]
    wanted = _lines_wanted(argv[1:])
    return CommandResult(argv, 0, "".join(lines[-wanted:] if wanted else lines))
