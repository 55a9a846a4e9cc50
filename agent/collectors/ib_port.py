"""One InfiniBand/RoCE port from sysfs: state, rate, addresses, counters, its netdev.

Formats are the kernel's (drivers/infiniband/core/sysfs.c,
Documentation/ABI/stable/sysfs-class-infiniband). Every value is read on its own: a file
that is missing, unreadable or holds garbage costs that value (recorded in ``unknown``
with the reason), never the port.
"""

from __future__ import annotations

import re

from ..model.ib import COUNTER_MAX, DATA_COUNTERS, IbPort
from ..read.sysfs import FileCounter, list_dir, parse_int, read_decimals, read_int, read_text
from .roce import read_gids

# "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)", "0 GB/sec" (procfs TestParseSlowRate).
_RATE_RE = re.compile(r"^(?P<gbps>\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((?P<width>\d+X)\s*"
                      r"(?P<speed>[A-Za-z0-9]+)\))?", re.IGNORECASE)
# "4: ACTIVE", "5: LinkUp"; the name may hold spaces ("7: Phy Test").
_STATE_RE = re.compile(r"^\d+:\s*(?P<name>\S.*)$")


def parse_rate(text: str) -> tuple[float, str | None, str | None] | None:
    """(Gb/s, width, speed name) of a ``rate`` file, or None when it is not one."""
    m = _RATE_RE.match(text.strip())
    if m is None:
        return None
    return float(m["gbps"]), m["width"], m["speed"]


def parse_state(text: str) -> str | None:
    """The name of ``4: ACTIVE``; None when the text is not ``N: NAME``."""
    m = _STATE_RE.match(text.strip())
    return m["name"].strip() if m else None


def _named(path: str, key: str, port: IbPort, counter: FileCounter) -> str | None:
    text, reason = read_text(path, counter)
    if text is None:
        port.unknown[key] = reason or "unreadable"
        return None
    name = parse_state(text)
    if name is None:
        port.unknown[key] = f"garbage {text[:40]!r}"
    return name


def _number(path: str, key: str, port: IbPort, counter: FileCounter) -> int | None:
    value, reason = read_int(path, counter)
    if value is None:
        port.unknown[key] = reason or "unreadable"
    return value


def _counter_value(text: str) -> tuple[int | None, str | None]:
    # Old kernels print "N/A (no PMA)" for counters the HCA cannot answer.
    if text.startswith("N/A"):
        return None, f"not supported ({text[:40]})"
    value, reason = parse_int(text, 10)
    if value is not None and value < 0:
        return None, f"garbage {text[:40]!r}"
    return value, reason


def read_counters(directory: str, group: str, port: IbPort, counter: FileCounter
                  ) -> dict[str, int | None]:
    values = read_decimals(directory, counter)
    for name, value in values.items():
        if value is None:  # not a plain number: read again to say why
            text, reason = read_text(f"{directory}/{name}", counter)
            if text is not None:
                value, reason = _counter_value(text)
        if value is None:
            port.unknown[f"{group}/{name}"] = reason or "unreadable"
        elif group == "counters" and name in DATA_COUNTERS:
            value *= 4
        elif group == "counters" and COUNTER_MAX.get(name) == value:
            port.saturated.append(name)
        values[name] = value
    return values


def _gid_prefix(path: str, port: IbPort, counter: FileCounter) -> str | None:
    text, reason = read_text(path, counter)
    if text is None:
        port.unknown["gid_prefix"] = reason or "unreadable"
        return None
    groups = text.split(":")
    if len(groups) != 8 or not all(re.fullmatch(r"[0-9a-fA-F]{1,4}", g) for g in groups):
        port.unknown["gid_prefix"] = f"garbage {text[:40]!r}"
        return None
    return ":".join(g.lower().zfill(4) for g in groups[:4])


def _netdev_name(port_dir: str, device_dir: str, on_pci: bool, counter: FileCounter
                 ) -> str | None:
    """The netdev of a port: the GID table's (authoritative for RoCE, bonds and VLANs),
    else the one netdev of the same PCI function (MLNX_OFED's ibdev2netdev maps them
    alike), looked for only where the device has one (``on_pci``: its ``device`` link)."""
    text, _ = read_text(f"{port_dir}/gid_attrs/ndevs/0", counter)
    if text or not on_pci:
        return text or None
    names = list_dir(f"{device_dir}/device/net")
    return names[0] if len(names) == 1 else None


def read_netdev(net_dir: str, port: IbPort, counter: FileCounter) -> None:
    """The port's netdev's operstate and MTU; ``net_dir``: /sys/class/net under the root."""
    if port.netdev is None:
        return
    base = f"{net_dir}/{port.netdev}"
    text, reason = read_text(f"{base}/operstate", counter)
    if text is None:
        port.unknown["netdev_operstate"] = reason or "unreadable"
    else:
        port.netdev_operstate = text
    value, reason = read_int(f"{base}/mtu", counter, 10)
    if value is None:
        port.unknown["netdev_mtu"] = reason or "unreadable"
    port.netdev_mtu = value


def read_port(net_dir: str, device_dir: str, number: int, with_counters: bool,
              counter: FileCounter, on_pci: bool = True) -> IbPort:
    """One port; counters only when ``with_counters`` (see the collector for why);
    ``net_dir``: /sys/class/net under the root, for the port's netdev."""
    # Plain string paths: joining a Path per file cost about as much as reading it.
    base = f"{device_dir}/ports/{number}"
    port = IbPort(port=number)
    port.state = _named(f"{base}/state", "state", port, counter)
    port.phys_state = _named(f"{base}/phys_state", "phys_state", port, counter)
    text, reason = read_text(f"{base}/rate", counter)
    rate = parse_rate(text) if text is not None else None
    if rate is None:
        port.unknown["rate"] = reason or f"garbage {(text or '')[:40]!r}"
    else:
        port.rate_gbps, port.width, port.speed = rate
    text, reason = read_text(f"{base}/link_layer", counter)
    if text in ("InfiniBand", "Ethernet", "Unknown"):
        port.link_layer = text
    else:
        port.unknown["link_layer"] = reason or f"garbage {(text or '')[:40]!r}"
    port.lid = _number(f"{base}/lid", "lid", port, counter)
    port.sm_lid = _number(f"{base}/sm_lid", "sm_lid", port, counter)
    port.sm_sl = _number(f"{base}/sm_sl", "sm_sl", port, counter)
    port.cap_mask = _number(f"{base}/cap_mask", "cap_mask", port, counter)
    port.gid_prefix = _gid_prefix(f"{base}/gids/0", port, counter)
    port.netdev = _netdev_name(base, device_dir, on_pci, counter)
    read_netdev(net_dir, port, counter)
    if port.link_layer == "Ethernet":
        read_gids(base, port, counter)
    if with_counters:
        port.counters = read_counters(f"{base}/counters", "counters", port, counter)
        port.hw_counters = read_counters(f"{base}/hw_counters", "hw_counters", port, counter)
    return port
