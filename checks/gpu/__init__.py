"""GPU checks: presence, identity, Xids, thermals, clocks, power, PCIe, modes, leftovers
and memory health, a module per concern; ``helpers`` holds what they share.

Each check judges what the NVML, PCI and kernel-log collectors put in the snapshot and
nothing else. A value NVML does not support on a part (``gpu.unsupported``: NotSupported,
FunctionNotFound, NoPermission...) is a ``skip`` with the reason, never a fail; a GPU that
does not answer is judged once, by ``gpu.responsive``, and skipped by the others.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("identity", "memory", "modes", "pcie", "presence", "processes", "recovery",
           "thermal", "xid")
