"""ib.firmware: each NIC runs the firmware the config expects."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import devices, no_compute, unknown_finding

# -- ib.firmware ------------------------------------------------------------------------


@parameters
class FirmwareParams(Params):
    expected: Mapping[str, str] = param(
        {}, doc="HCA model (hca_type, MT4129) -> the firmware version it must run")


@check("ib.firmware", needs=("infiniband",), params=FirmwareParams,
       remedy="Bring every HCA of one model to the same firmware (mlxfwmanager or the "
              "vendor's bundle), then reboot or reset the device. Pin versions in config "
              "(checks: {ib.firmware: {expected: {MT4129: 28.41.1000}}}) to make a "
              "mismatch fail.",
       actions=(Action.FIX_CONFIG,))
def firmware(ctx: CheckContext) -> Iterator[Finding]:
    """HCAs of one model run one firmware version on this node (and the pinned one)."""
    pinned = FirmwareParams.of(ctx).expected
    by_type: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for dev in devices(ctx):
        if dev.fw_ver is None:
            yield unknown_finding(dev.name, "firmware version", dev.unknown.get("fw_ver"))
            continue
        by_type[dev.hca_type or "unknown type"][dev.fw_ver].append(dev.name)
    for hca_type, versions in sorted(by_type.items()):
        majority = max(versions, key=lambda v: (len(versions[v]), v))
        want = pinned.get(hca_type)
        for version, names in sorted(versions.items()):
            for name in names:
                if want is not None and version != want:
                    yield Finding.fail(name, "HCA firmware is not the pinned version", version,
                                       want, Action.FIX_CONFIG)
                elif want is None and version != majority:
                    yield Finding.warn(name, "HCA firmware differs from the node's other "
                                             "HCAs of its model", version, majority,
                                       Action.FIX_CONFIG)
                else:
                    yield Finding.passed(name, "HCA firmware consistent", version)
    if not devices(ctx):
        yield no_compute(ctx)
