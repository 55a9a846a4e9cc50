"""ib.kernel_errors: mlx5 errors in the kernel log."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, devices

# -- ib.kernel_errors -------------------------------------------------------------------

# (event kind, status, message, action)
_KERNEL_RULES = {
    "mlx5_health": (Status.FAIL, "mlx5 health error in the kernel log", Action.REBOOT),
    # The NIC never came up (error -110: its firmware did not answer): no port on it works
    # until a reboot, and one that repeats needs the firmware or the card replaced.
    "mlx5_probe_failed": (Status.FAIL, "mlx5 device failed to load (probe) in the kernel log",
                          Action.REBOOT),
    "pcie_slot_power": (Status.FAIL, "PCIe slot power fault in the kernel log",
                        Action.INVESTIGATE),
    "module_temperature": (Status.WARN, "NIC module high temperature in the kernel log",
                           Action.INVESTIGATE),
}


@parameters
class IbKernelErrorsParams(Params):
    window_s: int = param(7200, ge=0, doc="how far back an event counts, in seconds")


@check("ib.kernel_errors", needs=("kernel_log",), params=IbKernelErrorsParams,
       remedy="mlx5 health errors (fatal syndromes, lost heartbeat, recovery flows) and a "
              "device that failed to load (probe/mlx5_load_one error) mean the NIC firmware "
              "failed: read `dmesg | grep mlx5`, collect `mlxdump`/sysinfo and reboot; "
              "repeats need a firmware update or an RMA. Slot power faults: check the riser "
              "and PSU. High "
              "module temperature: check airflow and the transceiver.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def kernel_errors(ctx: CheckContext) -> Iterator[Finding]:
    """No mlx5 health or load failures, slot-power or NIC module-temperature errors within
    ``window_s``: a NIC whose probe failed has no ports, so nothing else reports it."""
    log = ctx.snapshot.kernel_log
    if log is None:
        yield Finding.error(NODE, "kernel log was not collected")
        return
    if log.unknown and not log.lines_read:
        yield Finding(Status.ERROR, NODE, "kernel log unreadable", observed=dict(log.unknown),
                      action=Action.INVESTIGATE)
        return
    names = {d.pci_bdf: d.name for d in devices(ctx) if d.pci_bdf}
    since = ctx.now - IbKernelErrorsParams.of(ctx).window_s
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for event in log.events:
        if event.kind not in _KERNEL_RULES or (event.time is not None and event.time < since):
            continue
        where = names.get(event.device or "", event.device or NODE)
        grouped[(where, event.kind)].append(event.raw)
    for (where, kind), raws in sorted(grouped.items()):
        status, message, action = _KERNEL_RULES[kind]
        yield Finding(status, where, message, {"count": len(raws), "last": raws[-1][:200]},
                      "none", action)
    if not grouped:
        yield Finding.passed(NODE, "no mlx5 health or load, slot power or module temperature "
                                   "errors")
