"""GPU checks: presence, identity, Xids, thermals, clocks, power, PCIe, modes, leftovers
and memory health, a module per concern; ``helpers`` holds what they share.

Each check judges what the NVML, PCI and kernel-log collectors put in the snapshot and
nothing else. A value NVML does not support on a part (``gpu.unsupported``: NotSupported,
FunctionNotFound, NoPermission...) is a ``skip`` with the reason, never a fail; a GPU that
does not answer is judged once, by ``gpu.responsive``, and skipped by the others.
Importing the package registers every gpu.* check.
"""

from __future__ import annotations

from . import identity, memory, modes, pcie, presence, processes, recovery, thermal, xid

__all__ = ["identity", "memory", "modes", "pcie", "presence", "processes", "recovery",
           "thermal", "xid"]
