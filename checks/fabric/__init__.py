"""Fabric checks: the Fabric Manager daemon (``services``), IMEX (``imex``), NVML fabric
registration (``state``), NVL72 cliques (``clique``) and fabric health (``health``), a module
per concern; ``helpers`` holds what they share. The GPU-to-Grace NVLink-C2C links
(``c2c``, checks ``c2c.*``) live here too, as the ``roce.*`` checks live in ``ib``.

Which fabric software a node runs depends on the platform (Fabric Manager user guide): HGX/DGX
boards with NVSwitch chips (A100, H100, H200, B200) need ``nvidia-fabricmanager``; GB200
and GB300 NVL72 compute trays do not run it (the fabric is managed on the switch trays)
and instead register each GPU with the rack's NVLink domain, reported per GPU by NVML's
fabric info, and run ``nvidia-imex`` for cross-tray memory sharing. NVML fabric info is
Hopper+: on A100 and PCIe cards it is NotSupported, which is a skip, never a failure.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("c2c", "clique", "health", "imex", "services", "state")
