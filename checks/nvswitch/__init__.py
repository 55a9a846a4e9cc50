"""NVSwitch checks: the board's NVSwitch chips (nvswitch.count), the ConnectX-7 functions
that manage them where they are no PCI functions (nvswitch.management), and their SXid
errors (nvswitch.sxid). Importing the package registers every nvswitch.* check."""

from __future__ import annotations

from . import switches

__all__ = ["switches"]
