"""NVLink checks: links up and their version (``links``), GPU-pair reachability and link
endpoints (``topology``), error rates (``error_rate``), NVLink5 per-link speed, bit error
rates and FEC history (``link_health``); ``helpers`` holds what they share.
The NVSwitch chips have their own family, ``checks/nvswitch/switches.py``.

The NVLink checks judge what NVML reported per GPU and per link. A GPU without NVLink
(a PCIe card, or a profile that expects none) skips every one of them: an NVLink verdict
on a PCIe GPU is the false positive users complain about most (DCGM #49, NVSentinel
#1481). A GPU in MIG mode skips too: MIG turns GPU peer-to-peer off, NVLink included.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("error_rate", "link_health", "links", "topology")
