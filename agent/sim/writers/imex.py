"""IMEX on a simulated NVL72 tray: its domain's 18 addresses, the nodes file that lists
them, and ``nvidia-imex-ctl -N`` in both its forms.

The text form is laid out as a published 570.172 listing of an 18-tray GB200 domain prints
it (shared/data/real/gb200/imex-ctl-N__p6e-gb200-18node-UP__UNATTRIBUTED-aws-doc.txt: a
documentation example, UNATTRIBUTED in that folder's SOURCES.md and possibly hand-edited
per its header; its unknown licence keeps it out of tests/fixtures, tests/unit/test_imex.py
reads it from there): the
connectivity legend, a M/D/YYYY timestamp, ``Nodes:`` with one padded line per node, the
``Nodes From\\To`` matrix of 4-wide cells, ``Domain State:``. The JSON form (``-j``) follows
the shape NVIDIA's ai-cloud-validation documents from live 580 domains
(isvctl/configs/providers/aws/scripts/network/imex_domain_test.py @ 505d262): ``nodes``
keyed by index with ``status``, ``host``, ``connections``, ``changed`` and ``version``, then
``timestamp`` and the domain's ``status``. No capture shows a tray missing: its node reads
UNAVAILABLE with INVALID connections (the same source's note on a down peer), ``I`` in
the matrix (the legend's "Node wasn't reachable") and the domain DEGRADED (one of the three
states DCGM's DcgmImexManager reads); its version is left empty.
"""

from __future__ import annotations

import hashlib
import json
import re
import time

from ...read.sources import CommandResult
from ..state.hardware import SimNode

TRAYS = 18  # compute trays of one NVL72 domain
UNIT = "nvidia-imex.service"
_LEGEND = (
    "Connectivity Table Legend:",
    "I - Invalid - Node wasn't reachable, no connection status available",
    "N - Never Connected",
    "R - Recovering - Connection was lost, but clean up has not yet been triggered.",
    "D - Disconnected - Connection was lost, and clean up has been triggreed.",
    "A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.",
    "!V! - Version mismatch, communication disabled.",
    "!M! - Node map mismatch, communication disabled.",
    "C - Connected - Ready for operation",
)


def domain_hosts(node: SimNode) -> list[str]:
    """The 18 trays' addresses, the same on every tray of a rack."""
    digest = hashlib.sha256((node.rack or node.name).encode()).digest()
    return [f"10.{digest[0]}.{digest[1]}.{10 + i}" for i in range(TRAYS)]


def own_index(node: SimNode) -> int:
    """This tray's place in the nodes file: its name's trailing number (tray01 is #0)."""
    digits = re.search(r"(\d+)$", node.name)
    return (int(digits.group(1)) - 1) % TRAYS if digits else 0


def nodes_config(node: SimNode) -> str:
    return "".join(f"{host}\n" for host in domain_hosts(node))


def fib_trie(node: SimNode) -> str:
    """``/proc/net/fib_trie`` holding the loopback and the tray's own domain address as
    local routes, laid out as Linux's ``fib_trie_seq_show`` prints them (a ``|-- ADDR``
    leaf, then ``/32 host LOCAL``; net/ipv4/fib_trie.c): how the tray, like its IMEX
    daemon, finds which entry of the nodes file is itself."""
    leaves = "".join(f"     |-- {address}\n        /32 host LOCAL\n"
                     for address in ("127.0.0.1", domain_hosts(node)[own_index(node)]))
    return f"Local:\n  +-- 0.0.0.0/0 2 0 2\n{leaves}"


def _timestamp(node: SimNode) -> str:
    at = time.gmtime(node.epoch)
    return (f"{at.tm_mon}/{at.tm_mday}/{at.tm_year} "
            f"{time.strftime('%H:%M:%S', at)}.{int(node.epoch * 1000) % 1000:03d}")


def _state(node: SimNode) -> str:
    return "DEGRADED" if node.imex_missing else "UP"


def _text(node: SimNode) -> str:
    hosts = domain_hosts(node)
    lines = [*_LEGEND, "", _timestamp(node), "Nodes:"]
    for i, host in enumerate(hosts):
        missing = i in node.imex_missing
        status = "UNAVAILABLE" if missing else "READY"
        version = "" if missing else node.driver_version
        lines.append(f"Node #{i:<3} - {host:<15} - {status:<20} - Version: {version}")
    lines += ["", (" Nodes From\\To  " + "".join(f"{j:<4}" for j in range(len(hosts)))).rstrip()]
    for i in range(len(hosts)):
        cells = "".join(f"{'I' if {i, j} & node.imex_missing else 'C':<4}"
                        for j in range(len(hosts)))
        lines.append(f"{i:>8}        {cells}".rstrip())
    return "\n".join([*lines, "", f"Domain State: {_state(node)}"]) + "\n"


def _json(node: SimNode) -> str:
    hosts = domain_hosts(node)

    def entry(i: int) -> dict[str, object]:
        missing = i in node.imex_missing
        return {"status": "UNAVAILABLE" if missing else "READY", "host": hosts[i],
                "connections": {str(j): {"host": hosts[j], "status": "INVALID" if {i, j}
                                         & node.imex_missing else "CONNECTED",
                                         "changed": True} for j in range(len(hosts))},
                "changed": True, "version": "" if missing else node.driver_version}

    return json.dumps({"nodes": {str(i): entry(i) for i in range(len(hosts))},
                       "timestamp": _timestamp(node), "status": _state(node)}, indent=2) + "\n"


def imex_ctl(node: SimNode, argv: list[str]) -> CommandResult:
    """``nvidia-imex-ctl -N`` and ``-N -j`` on a tray whose IMEX service runs; any other
    form, or a tray without the service, is the simulator's limit, said as such."""
    if not node.profile.imex or node.services.get(UNIT) != "active":
        return CommandResult(argv, None, error="nvidia-imex-ctl: no IMEX daemon on this "
                                                "simulated node (not simulated)")
    if argv[1:] == ["-N"]:
        return CommandResult(argv, 0, _text(node))
    if argv[1:] == ["-N", "-j"]:
        return CommandResult(argv, 0, _json(node))
    return CommandResult(argv, None, error=f"nvidia-imex-ctl {' '.join(argv[1:])} is not "
                                           "simulated")
