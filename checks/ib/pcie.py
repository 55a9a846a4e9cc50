"""ib.pcie_link: each NIC's PCIe link trained at its full generation and width."""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.ib import IbDevice
from ...agent.model.pci import GEN_GTS
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import NODE, devices, no_compute, unknown_finding

# -- ib.pcie_link -----------------------------------------------------------------------


def _pcie(dev: IbDevice, gen: int | None, width: int | None) -> Finding:
    speed = GEN_GTS.get(gen) if gen else None
    if (speed and dev.pcie_speed_gts is None) or (width and dev.pcie_width is None):
        missing = "current_link_speed" if dev.pcie_speed_gts is None else "current_link_width"
        return unknown_finding(dev.name, "NIC PCIe link", dev.unknown.get(missing))
    observed = {"speed_gts": dev.pcie_speed_gts, "width": dev.pcie_width,
                "max_speed_gts": dev.pcie_max_speed_gts, "max_width": dev.pcie_max_width}
    expected = {"speed_gts": speed, "width": width}
    slow = speed is not None and (dev.pcie_speed_gts or 0) < speed
    narrow = width is not None and (dev.pcie_width or 0) < width
    if slow or narrow:
        what = "width" if narrow else "speed"
        return Finding.fail(dev.name, f"NIC PCIe link below the platform's {what}", observed,
                            expected, Action.INVESTIGATE)
    return Finding.passed(dev.name, "NIC PCIe link as expected", observed, expected)


@check("ib.pcie_link", needs=("infiniband",),
       remedy="A NIC that trained its PCIe link down (NICs do not drop speed when idle) "
              "cannot feed its port: reseat the card or riser, check the slot and BIOS "
              "bifurcation settings, and look for AER errors (host.pcie_aer).",
       actions=(Action.INVESTIGATE,))
def pcie_link(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute NIC's PCIe link runs at the platform's generation and width."""
    gen, width = ctx.profile.nic_pcie_gen, ctx.profile.nic_pcie_width
    if gen is None and width is None:
        yield Finding.skip(NODE, "profile states no NIC PCIe link")
        return
    compute = [d for d in devices(ctx) if d.role == "compute"]
    for dev in compute:
        if dev.pci_bdf is None:
            yield unknown_finding(dev.name, "NIC PCIe link", dev.unknown.get("pci_bdf"))
        else:
            yield _pcie(dev, gen, width)
    if not compute:
        yield no_compute(ctx)
