"""What iproute2's ``dcb`` prints for a simulated node's RoCE netdevs.

Formats as dcb(8) and dcb-pfc(8)/dcb-app(8) show them: ``pfc-cap 8 macsec-bypass off
delay 0`` then ``prio-pfc 0:off 1:off 2:off 3:on ...``; ``dcb -N app show dev IF
dscp-prio`` prints ``dscp-prio 26:3 48:6`` (nothing when there is no DSCP entry).
"""

from __future__ import annotations

from ...read.sources import CommandResult
from ..state.hardware import SimNode
from ..state.ib import SimIbPort


def _port(node: SimNode, netdev: str) -> SimIbPort | None:
    for hca in node.hcas:
        for port in hca.ports:
            if port.link_layer == "Ethernet" and port.netdev == netdev:
                return port
    return None


def dcb(node: SimNode, argv: list[str]) -> CommandResult:
    words = [a for a in argv[1:] if a != "-N"]
    netdev = words[words.index("dev") + 1] if "dev" in words[:-1] else ""
    port = _port(node, netdev)
    if port is None:
        return CommandResult(argv, 1, stderr=f"Cannot find device \"{netdev}\"\n")
    if words[:2] == ["pfc", "show"]:
        flags = " ".join(f"{p}:{'on' if p in port.pfc else 'off'}" for p in range(8))
        return CommandResult(argv, 0, f"pfc-cap 8 macsec-bypass off delay 0\nprio-pfc {flags}\n")
    if words[:2] == ["app", "show"]:
        entries = " ".join(f"{d}:{p}" for d, p in sorted(port.dscp_prio.items()))
        return CommandResult(argv, 0, f"dscp-prio {entries}\n" if entries else "")
    return CommandResult(argv, 1, stderr="Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }\n")
