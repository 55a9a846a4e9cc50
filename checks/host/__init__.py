"""Host checks: CPUs and memory (``resources``), disks and mounts (``storage``), systemd
units (``services``), the clock (``clock``), the kernel command line (``cmdline``), kernel-log
errors (``kernel_errors``), firmware hardware error records (``cper``), stuck processes
(``processes``), PCIe AER (``pcie``), the profile the node was judged against
(``profile``) and the versions it expects (``versions``), a module per concern;
``helpers`` holds what they share.

Each check judges what the host, PCI and kernel-log collectors put in the snapshot and
nothing else. Messages are stable text so one problem on many nodes groups into one line
of the cluster report; the numbers of each node go in ``observed``/``expected``.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("clock", "cmdline", "cper", "kernel_errors", "pcie", "processes", "profile",
           "resources", "services", "storage", "versions")
