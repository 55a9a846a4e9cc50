"""What each active-test fault does to a simulated node (the table is in catalog.py): one
part runs at ``factor`` of its healthy rate (sim/bandwidth.py), NCCL falls back to
sockets, or every tool hangs. A node's passive checks see none of these: only traffic
shows them, which is why ``clusterdiag qualify`` exists. Some show only between nodes: a
rail's cable (``cable``: the same-host loopback never leaves the HCA), the rack's spine
uplinks (``uplink``), a tray's multi-node NVLink (``mnnvl``) or its missing IMEX channel."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..state.hardware import SimNode

Apply = Callable[[SimNode, Mapping[str, Any]], None]
DEFAULT_FACTOR = 0.8  # 20 % slow: a fail-slow part that clears every absolute floor
# Parts that are the node's as a whole: its rack's leaf uplinks to the spine, its path into
# the NVL72 rack's NVLink switch trays.
NODE_WIDE = ("uplink", "mnnvl")


def slow(part: str) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        where = fault["hca"] if part in ("rail", "cable") else \
            0 if part in NODE_WIDE else int(fault["gpu"])
        node.slow[f"{part}:{where}"] = float(fault.get("factor", DEFAULT_FACTOR))
    return apply


def socket_fallback(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.socket_fallback = True


def imex_channel_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.imex_channel = False


def tool_hang(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.tools_hang = True


def factor_problem(fault: Mapping[str, Any]) -> str | None:
    """Why a ``factor`` key is unusable: it must be a number in (0, 1]."""
    if "factor" not in fault:
        return None
    value = fault["factor"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return f"factor {value!r} is not a number in (0, 1]"
    return None
