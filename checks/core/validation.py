"""What returns a drained node to service: the validation each fault class calls for,
declared beside its check (``@check(..., validation=...)``) and shown by ``checks explain``.

Two kinds. A state or configuration fault (a service down, a setting wrong, a port down)
is gone when its check passes again, and stays gone for a hold-down (a service that
crash-loops passes between restarts): ``recheck``, the default of every check that
declares nothing, in a family of its own (its check id). A fault that state cannot rule
out is validated by the ``clusterdiag qualify`` node tests that would find it again
(``qualify``): NVLink or NVSwitch errors, an IB port that flapped, a GPU that needed a
reset, thermal or power trouble, a slow GPU or rail found by qualify itself. Every
validation also asks the incident's check to pass first: a qualify test run on a GPU
whose Xid has not been reset away proves nothing.

The ``family`` is what incidents are counted by (agent/health/lifecycle.py): the checks
that share a fault class share its strikes.
"""

from __future__ import annotations

import enum

from ...agent.model.record import record
from ..catalogs.manifest import ACTIVE

HOLD_DOWN_S = 600.0
"""How long a recheck's check must have been passing since the incident before the node
returns (the issue's default of 10 minutes, per family)."""

QUALIFY_PREFIX = "qualify."
"""A qualify test's findings are named ``qualify.<test>`` (checks/qualify/judge.py)."""

_XID_CATALOG = ("NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors, the 'Resolution' "
                "column; checks/catalogs/xid_catalog.tsv)")


class Kind(enum.Enum):
    RECHECK = "recheck"  # the check passes again, hold_down_s after the incident
    QUALIFY = "qualify"  # the check passes, then the named qualify node tests pass


@record(frozen=True)
class Validation:
    """One fault class's way back: its ``family`` (what incidents count under), its
    ``kind``, the qualify node tests it runs (names of checks/qualify/active.py's node
    tests), the hold-down, and ``source``: why this validation, cited."""

    family: str
    kind: Kind
    tests: tuple[str, ...] = ()
    hold_down_s: float = HOLD_DOWN_S
    source: str = ""

    def describe(self) -> str:
        """One line for ``checks explain``."""
        if self.kind is Kind.RECHECK:
            return (f"recheck: the check passes again {self.hold_down_s:g} s after the "
                    f"incident (family {self.family})")
        return (f"qualify: qualify's node tests {', '.join(self.tests)} pass, once the "
                f"check no longer fails (family {self.family})")


def recheck(family: str, hold_down_s: float = HOLD_DOWN_S) -> Validation:
    return Validation(family, Kind.RECHECK, hold_down_s=hold_down_s,
                      source="a state or configuration fault: the check reads the state "
                             "itself, so its passing again is the evidence")


def _qualify(family: str, tests: tuple[str, ...], source: str) -> Validation:
    return Validation(family, Kind.QUALIFY, tests, hold_down_s=0.0, source=source)


NVLINK = _qualify(
    "nvlink", ("allreduce", "d2d"),
    "NVLink error counters are reset with the GPU and a marginal link passes every state "
    "check until it is loaded again (NVIDIA DCGM diagnostics, docs.nvidia.com/datacenter/"
    "dcgm/latest/user-guide/dcgm-diagnostics.html: the NVLink status and bandwidth tests "
    "stress the links); the local all-reduce and nvbandwidth device-to-device load them")
NVSWITCH = _qualify(
    "nvswitch", ("allreduce", "d2d"),
    "an SXid is an event, not a state (NVIDIA Fabric Manager user guide, 'NVSwitch SXid "
    "errors'): only traffic through the switches shows the fault is gone")
IB_PORT = _qualify(
    "ib_port", ("nic",),
    "a port that flapped is ACTIVE again between episodes (link_downed and "
    "link_error_recovery count the flaps: the kernel's Documentation/ABI/stable/"
    "sysfs-class-infiniband); only traffic on the rail, its NIC loopback, shows the link holds")
XID_RESET = _qualify(
    "xid_reset", ("gpu_compute", "hbm"),
    f"{_XID_CATALOG}: these Xids call for a GPU reset or a reboot, after which no counter "
    "remembers them; the check passing shows the reset was seen, the burn and the HBM "
    "test show the GPU computes and its memory copies at speed")
THERMAL_POWER = _qualify(
    "thermal_power", ("gpu_compute",),
    "an idle GPU is cool and unthrottled (NVML clock event reasons are set only under "
    "load, nvml.h nvmlClocksEventReasons); only a sustained burn reaches the thermal "
    "and power limits again")


def for_qualify_test(check_id: str) -> Validation | None:
    """A fault qualify found (``qualify.gpu_compute``) is validated by the same node test;
    None for a test between nodes, which one node cannot run alone."""
    test = check_id.removeprefix(QUALIFY_PREFIX)
    declared = ACTIVE.get(test) if check_id.startswith(QUALIFY_PREFIX) else None
    if declared is None or declared.get("scope") != "node":
        return None
    return _qualify(check_id, (test,),
                    "a slow GPU or rail found by an active test passes every state check: "
                    "only the same test, passing against the profile's floor, clears it")
