"""What a RoCE port's lossless setup rests on: its GID table, ECN, PFC and the trust mode.

Read for Ethernet ports only, as facts; checks/ib/roce.py judges them against the profile.

- GIDs: ``ports/<p>/gids/<i>``, ``gid_attrs/types/<i>`` and ``gid_attrs/ndevs/<i>``
  (kernel Documentation/ABI/stable/sysfs-class-infiniband). An empty entry reads as the all-zero
  GID and its attributes fail with EINVAL. A RoCE table fills from index 0 (the
  link-local pair, then a v1/v2 pair per address), so the first ``GID_SCAN`` entries are
  read, stopping after ``GID_EMPTY_RUN`` empty ones in a row: NCCL's own choice
  (``NCCL_IB_GID_INDEX=-1``) lands on one of the first pairs.
- ECN: mlx5 exposes ``/sys/class/net/<if>/ecn/roce_np/enable/<prio>`` and
  ``ecn/roce_rp/enable/<prio>`` (0/1 per priority; the layout of the real procfs fixture
  in tests/fixtures/ib/procfs). Other drivers have no such directory.
- PFC and trust: ``dcb pfc show dev IF`` (iproute2: ``prio-pfc 0:off .. 3:on ..``) and
  ``dcb -N app show dev IF dscp-prio`` (``dscp-prio 24:3 26:3 ..``). mlx5 switches the
  port to DSCP trust when the first DSCP application entry is set and back to PCP when the
  last is removed (``mlx5e_dcbnl_ieee_setapp``/``delapp``), so DSCP entries mean trust
  dscp. Where ``dcb`` is not installed, ``mlnx_qos -i IF`` (MLNX_OFED), whose output names
  the trust state, the DSCP-to-priority map and the PFC line. Each command runs under its
  own deadline and the source's.
"""

from __future__ import annotations

import re
import threading
import time
from functools import partial
from pathlib import Path

from ..base.lazy_re import LazyPattern
from ..model.ib import IbPort, RoceGid, RoceQos
from ..read.sources import SourceEnv
from ..read.sysfs import FileCounter, list_dir, read_text, under
from .kept import kept

GID_SCAN = 32
GID_EMPTY_RUN = 8
TOOL_TIMEOUT_S = 2.0
PRIORITIES = range(8)

_ZERO_GID = LazyPattern(r"^[0:]*$")
_PRIO_STATE = LazyPattern(r"\b([0-7]):(on|off)\b")
_DSCP_PRIO = LazyPattern(r"\b(\d{1,2}):([0-7])\b")
_MLNX_TRUST = LazyPattern(r"Priority trust state:\s*(\w+)")
_MLNX_DSCP = LazyPattern(r"prio:\s*([0-7])\s+dscp:\s*([\d,\s]+)")
_MLNX_PFC = LazyPattern(r"PFC configuration:\s*\n\s*priority[\s\d]+\n\s*enabled\s+([\d\s]+)")


def read_gids(port_dir: str, port: IbPort, counter: FileCounter) -> None:
    """The port's non-empty GID entries among the first GID_SCAN."""
    empty_run = 0
    for index in range(GID_SCAN):
        text, reason = read_text(f"{port_dir}/gids/{index}", counter)
        if text is None:
            if index == 0:
                port.unknown["gids"] = reason or "unreadable"
            break
        if _ZERO_GID.match(text):
            empty_run += 1
            if empty_run >= GID_EMPTY_RUN:
                break
            continue
        empty_run = 0
        kind, why = read_text(f"{port_dir}/gid_attrs/types/{index}", counter)
        if kind is None:
            port.unknown[f"gid_attrs/types/{index}"] = why or "unreadable"
        netdev, _ = read_text(f"{port_dir}/gid_attrs/ndevs/{index}", counter)
        port.gids.append(RoceGid(index, text.lower(), kind or None, netdev or None))


def _enabled(directory: Path, counter: FileCounter) -> tuple[list[int] | None, str | None]:
    """Priorities whose ``enable/<prio>`` file reads 1; None and why when unreadable."""
    names = list_dir(directory)
    if not names:
        return None, "missing"
    on = []
    for prio in PRIORITIES:
        text, reason = read_text(f"{directory}/{prio}", counter)
        if text is None:
            return None, f"enable/{prio}: {reason or 'unreadable'}"
        if text not in ("0", "1"):
            return None, f"enable/{prio}: garbage {text[:20]!r}"
        if text == "1":
            on.append(prio)
    return on, None


def _read_ecn(base: Path, counter: FileCounter
              ) -> tuple[tuple[tuple[int, ...] | None, str | None], ...]:
    """(priorities on, why not read) of roce_np and roce_rp."""
    found = []
    for point in ("roce_np", "roce_rp"):
        value, reason = _enabled(base / point / "enable", counter)
        found.append((tuple(value) if value is not None else None, reason))
    return tuple(found)


def read_ecn(root: Path, netdev: str, qos: RoceQos, counter: FileCounter) -> None:
    """ECN per priority; set by hand like PFC and trust, so the agent keeps it as long as
    their answers (collectors/kept.py, agent.keep_s), while the netdev is the same one."""
    base = under(root, "/sys/class/net") / netdev / "ecn"
    points = kept("ecn", str(base), partial(_read_ecn, base, counter),
                  lambda found: all(value is not None for value, _ in found))
    for point, (on, reason) in zip(("roce_np", "roce_rp"), points, strict=True):
        value = list(on) if on is not None else None
        setattr(qos, f"ecn_{point[-2:]}", value)
        if value is None:
            qos.unknown[f"ecn/{point}"] = ("the driver exposes no ECN settings in sysfs"
                                           if reason == "missing" else reason or "unreadable")


def parse_dcb_pfc(text: str) -> list[int] | None:
    """Priorities with PFC on from ``dcb pfc show``; None when the line is not there."""
    line = next((ln for ln in text.splitlines() if "prio-pfc" in ln), None)
    if line is None:
        return None
    states = dict(_PRIO_STATE.findall(line.split("prio-pfc", 1)[1]))
    if set(states) != {str(p) for p in PRIORITIES}:
        return None
    return sorted(int(p) for p, state in states.items() if state == "on")


def parse_dcb_dscp(text: str) -> dict[int, int]:
    """DSCP -> priority entries of ``dcb -N app show ... dscp-prio``."""
    line = next((ln for ln in text.splitlines() if "dscp-prio" in ln), "")
    return {int(d): int(p) for d, p in _DSCP_PRIO.findall(line.split("dscp-prio", 1)[-1])
            if int(d) < 64}


def parse_mlnx_qos(text: str) -> tuple[str | None, list[int] | None, list[int] | None]:
    """(trust, PFC priorities, DSCP->priority as 64 entries) from ``mlnx_qos -i IF``."""
    trust = _MLNX_TRUST.search(text)
    pfc_match = _MLNX_PFC.search(text)
    pfc = None
    if pfc_match:
        flags = pfc_match[1].split()[:8]
        if len(flags) == 8 and set(flags) <= {"0", "1"}:
            pfc = [p for p, flag in enumerate(flags) if flag == "1"]
    table: dict[int, int] = {}
    for prio, dscps in _MLNX_DSCP.findall(text):
        for dscp in re.findall(r"\d+", dscps):
            table[int(dscp)] = int(prio)
    mapping = [table[d] for d in range(64)] if len(table) == 64 else None
    return (trust[1].lower() if trust else None), pfc, mapping


def _left(deadline: float) -> float:
    return min(TOOL_TIMEOUT_S, deadline - time.monotonic())


def _from_dcb(env: SourceEnv, netdev: str, qos: RoceQos, deadline: float) -> bool:
    """PFC and trust from ``dcb``; False when dcb is not installed."""
    pfc = env.runner(["dcb", "pfc", "show", "dev", netdev], _left(deadline))
    if pfc.error is not None and pfc.error.endswith("not found"):
        return False
    qos.tool = "dcb"
    if pfc.returncode != 0:
        qos.unknown["pfc"] = pfc.error or f"dcb pfc show: exit {pfc.returncode}: " \
                                          f"{pfc.stderr.strip()[:120]}"
    else:
        qos.pfc = parse_dcb_pfc(pfc.stdout)
        if qos.pfc is None:
            qos.unknown["pfc"] = f"dcb pfc show: no prio-pfc line in {pfc.stdout[:80]!r}"
    if _left(deadline) <= 0:
        qos.unknown["trust"] = "not read: the source's deadline passed"
        return True
    app = env.runner(["dcb", "-N", "app", "show", "dev", netdev, "dscp-prio"], _left(deadline))
    if app.returncode != 0:
        qos.unknown["trust"] = app.error or f"dcb app show: exit {app.returncode}: " \
                                            f"{app.stderr.strip()[:120]}"
        return True
    entries = parse_dcb_dscp(app.stdout)
    qos.trust = "dscp" if entries else "pcp"
    if entries:
        # DSCP values without an entry keep the firmware's default, DSCP >> 3.
        qos.dscp_prio = [entries.get(d, d >> 3) for d in range(64)]
    return True


def _from_mlnx_qos(env: SourceEnv, netdev: str, qos: RoceQos, deadline: float) -> None:
    result = env.runner(["mlnx_qos", "-i", netdev], _left(deadline))
    if result.returncode != 0:
        why = result.error or f"mlnx_qos: exit {result.returncode}: {result.stderr.strip()[:120]}"
        if result.error is not None and result.error.endswith("not found"):
            why = "neither dcb (iproute2) nor mlnx_qos (MLNX_OFED) is installed"
        qos.unknown["pfc"] = qos.unknown["trust"] = why
        return
    qos.tool = "mlnx_qos"
    qos.trust, qos.pfc, qos.dscp_prio = parse_mlnx_qos(result.stdout)
    if qos.pfc is None:
        qos.unknown["pfc"] = "mlnx_qos: no PFC configuration in its output"
    if qos.trust is None:
        qos.unknown["trust"] = "mlnx_qos: no trust state in its output"


def read_qos(env: SourceEnv, netdev: str, counter: FileCounter, deadline: float,
             tools: bool = True) -> RoceQos:
    """ECN from sysfs, then PFC and trust from dcb, else mlnx_qos; the tools only when
    ``tools`` (compute rails: a storage port's PFC is not NCCL's, and each tool costs the
    prolog a process)."""
    qos = RoceQos()
    read_ecn(env.root, netdev, qos, counter)
    if not tools:
        qos.unknown["pfc"] = qos.unknown["trust"] = "not read: not a compute rail"
    elif _left(deadline) <= 0:
        qos.unknown["pfc"] = qos.unknown["trust"] = "not read: the source's deadline passed"
    elif not _from_dcb(env, netdev, qos, deadline):
        _from_mlnx_qos(env, netdev, qos, deadline)
    return qos


def read_all_qos(env: SourceEnv, tools: dict[str, bool], counter: FileCounter,
                 deadline: float) -> dict[str, RoceQos]:
    """``read_qos`` of each netdev (``tools``: whether its PFC and trust are read with the
    tools), the netdevs side by side: each asks ``dcb`` twice, and one after the other
    they cost the prolog a process start apiece. Every tool call is bounded
    by the deadline, so waiting for the threads is too."""
    found: dict[str, RoceQos] = {}
    raised: list[Exception] = []
    counters = {netdev: FileCounter() for netdev in tools}

    def one(netdev: str) -> None:
        try:
            found[netdev] = read_qos(env, netdev, counters[netdev], deadline, tools[netdev])
        except Exception as exc:  # noqa: BLE001 - raised again below, in the source's thread
            raised.append(exc)

    threads = [threading.Thread(target=one, args=(netdev,), name=f"roce-{netdev}",
                                daemon=True) for netdev in tools if tools[netdev]]
    for thread in threads:
        thread.start()
    for netdev in tools:
        if not tools[netdev]:  # sysfs only: nothing to wait for
            one(netdev)
    for thread in threads:
        thread.join()
    if raised:  # out of descriptors (ReadFailed) or a bug: the source's error, as before
        raise raised[0]
    counter.count += sum(c.count for c in counters.values())
    return {netdev: found[netdev] for netdev in tools if netdev in found}
