"""The prolog's record of the PCI checks it re-ran as root, with what they were judged on:
the next job's prolog reads again what can move and judges again only when it moved.

The hardened agent may not read PCIe extended config space (the kernel gives an
unprivileged read of a function's ``config`` its first 64 bytes: drivers/pci/pci-sysfs.c
``pci_read_config``), so its report skips nccl.acs and the prolog re-runs it as root for
every job. Judging it means the PCI source, the snapshot model, the check registry and
its family: imports that cost the prolog about twice the interpreter's start, every job,
for a verdict that changes when the bus or a bridge's ACS control does. What such a check
(``index.PCI_TOPOLOGY_ONLY``) judges is:

- which functions the bus has and where: each one's vendor, class and the bridges above
  it. These are fixed while the function exists, and a function found again is a new
  entry of /sys/bus/pci/devices, which kernfs gives a new inode (collectors/kept.py;
  fs/kernfs/dir.c ``__kernfs_new_node`` numbers nodes cyclically, ``idr_alloc_cyclic``
  or in later kernels ``xa_alloc_cyclic``, so a number is not handed out again soon).
  So the record holds every entry of that directory with its inode, read in one
  listing;
- each bridge's ACS Control register, which ``setpci`` may change at any time: every
  prolog reads each one again, as root, with the collector's own reader
  (agent/read/pci_config.py: a few dwords of config space each), and compares.

Beside them the key holds the boot (inodes are per boot), the tree read (``--root``), the
code (the size and mtime of the checks' modules and of the PCI readers: an upgrade
rewrites them), the checks, the profile and the mode. A check with
parameters is never recorded: their values would belong in the key. Anything different,
and the checks are re-run (agent/run/lean.py) and the record rewritten. A record holds
only verdicts on what was read: a run with an error finding (our own trouble: a source
past its deadline, a check that raised) is never kept.

It lives in root's store (settings/config_cache.py ``RootStore``): written by root, in a
directory only root may write, never anything the agent's unprivileged user could have
written. Anything else is ignored with the reason and the checks re-run.
"""

from __future__ import annotations

import json
import os

from ...checks.core import index
from ...checks.core.finding import Finding, Status
from ..base.boot import boot_id
from ..read.pci_config import read_acs_ctrl
from ..settings.config_cache import RootStore, digest

TYPE_CHECKING = False  # typing stays off the prolog's path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import Any

NAME = "rerun.json"
WHAT = "re-run record"
FORMAT = "rerun-1"  # the store's key: the records' layout, each record under its own key
DEVICES = "sys/bus/pci/devices"
# Records kept at once: one per tree and boot; a node has one, the tests and benches a few.
MAX_RECORDS = 8
# The modules whose code makes the verdict besides the checks' own: the PCI readers.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_READERS = (os.path.join(_PACKAGE, "agent", "collectors", "pci.py"),
            os.path.join(_PACKAGE, "agent", "read", "pci_config.py"))


def suits(entries: list[index.Entry]) -> bool:
    """Whether these checks' verdict follows from the bus and the bridges' config alone."""
    return bool(entries) and all(e.id in index.PCI_TOPOLOGY_ONLY and not e.schema
                                 and e.needs == ("pci",) for e in entries)


def _code(entries: list[index.Entry]) -> list[list[object]]:
    files = sorted({*_READERS, *(os.path.join(_PACKAGE, "checks", *e.module.split("."))
                                  + ".py" for e in entries)})
    stamps: list[list[object]] = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            stamps.append([path, None])
        else:
            stamps.append([path, info.st_size, info.st_mtime_ns])
    return stamps


def _bus(root: str) -> list[list[object]] | None:
    """Every entry of the bus's device directory with its inode, none where there is no
    such directory (as the PCI source reads it: sysfs.list_present); None where it could
    not be read."""
    try:
        with os.scandir(os.path.join(root, DEVICES)) as entries:
            return sorted([entry.name, entry.inode()] for entry in entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError:
        return None


def _acs_controls(paths: list[str]) -> list[list[object]]:
    """Each bridge's ACS Control as root reads it now (the collector's own reader), or why
    it could not be read."""
    controls: list[list[object]] = []
    for path in paths:
        unknown: dict[str, str] = {}
        controls.append([path, read_acs_ctrl(path, unknown), unknown.get("acs")])
    return controls


class RerunRecord:
    """The record for one prolog: ``findings`` when the checks need not run again, else
    None with ``why``; ``keep`` stores a fresh verdict."""

    __slots__ = ("_stored", "key", "store", "why")

    def __init__(self, root: str | None, entries: list[index.Entry], profile: str, mode: str,
                 directory: str | None = None) -> None:
        self.store = RootStore(directory, NAME, WHAT)
        self.why: str | None = None
        self._stored: dict[str, Any] | None = None
        real_root = os.path.abspath(root or "/")
        bus = _bus(real_root)
        boot = boot_id()
        self.key: str | None = None
        if bus is None or boot is None:
            self.why = f"{WHAT}: the PCI bus or the boot id could not be read"
            return
        self.key = digest(json.dumps(
            [_code(entries), sorted(e.id for e in entries), profile, mode, boot, real_root,
             bus]).encode())

    def _records(self) -> dict[str, Any]:
        """The store's records, read once: a prolog that judged again keeps its verdict
        beside the others it read."""
        if self._stored is None:
            stored = self.store.get(FORMAT)
            self.why = self.store.why
            self._stored = stored if isinstance(stored, dict) else {}
        return self._stored

    def findings(self) -> list[Finding] | None:
        """The recorded verdict, when the bus and every bridge's config are as they were."""
        if self.key is None:
            return None
        record = self._records().get(self.key)
        if not isinstance(record, dict):
            self.why = self.why or f"{WHAT}: none for this bus, boot and code"
            return None
        acs, found = record.get("acs"), record.get("findings")
        if not isinstance(acs, list) or not isinstance(found, list) or not found \
                or not all(isinstance(read, list) and read and isinstance(read[0], str)
                           for read in acs):
            self.why = f"{WHAT}: not a record"
            return None
        if _acs_controls([read[0] for read in acs]) != acs:
            self.why = f"{WHAT}: a bridge's ACS control changed"
            return None
        try:
            return [Finding.from_dict(f) for f in found]
        except (KeyError, TypeError, ValueError, AttributeError):
            self.why = f"{WHAT}: a finding it holds is not one"
            return None

    def keep(self, findings: list[Finding], acs_read: list[list[object]]) -> None:
        """Record ``findings`` with the ACS control they were judged on, as the PCI source
        read it (``SourceEnv.acs_read``: never read again here, where a change since would
        be recorded beside a verdict on the value before it); never a verdict with an
        error in it (our trouble, not the node's)."""
        if self.key is None:
            return
        if not findings or any(f.status is Status.ERROR for f in findings):
            self.why = f"{WHAT}: a verdict with an error in it is not kept"
            return
        records = {k: v for k, v in self._records().items() if k != self.key}
        kept = dict(list(records.items())[-(MAX_RECORDS - 1):])
        kept[self.key] = {"acs": acs_read, "findings": [f.to_dict() for f in findings]}
        self.store.put(FORMAT, kept)
        self.why = self.store.why
