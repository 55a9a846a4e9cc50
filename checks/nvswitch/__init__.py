"""NVSwitch checks: the board's NVSwitch chips (nvswitch.count), the ConnectX-7 functions
that manage them where they are no PCI functions (nvswitch.management), and their SXid
errors (nvswitch.sxid).
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("switches",)
