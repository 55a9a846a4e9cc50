"""ib.hca_count: enough compute rails, each in the right mode, one per GPU where the
profile says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...agent.model.ib import DPU_TYPES, IbDevice
from ...agent.model.pci import MELLANOX_VENDOR
from ..core.finding import Action, Finding
from ..core.rails import HcaCountParams
from ..core.registry import CheckContext, check
from .helpers import NODE, devices

# -- ib.hca_count -----------------------------------------------------------------------


def _pci_without_rdma(ctx: CheckContext) -> list[str]:
    """Mellanox network functions on PCI that no RDMA device belongs to."""
    known = {d.pci_bdf for d in devices(ctx)}
    return sorted(d.bdf for d in ctx.snapshot.pci or []
                  if d.vendor == MELLANOX_VENDOR and (d.pci_class >> 16) == 0x02
                  and d.bdf not in known)


def _wrong_mode_rails(ctx: CheckContext, compute: list[IbDevice]) -> list[IbDevice]:
    """Devices that are not compute but sit beside a GPU, of the rails' model, on another
    link layer than the fabric's: a rail whose port was set to the wrong mode (mlxconfig
    LINK_TYPE), as opposed to a storage card of another model under the same switch (with no
    rail left to compare models with, any such device)."""
    layer = ctx.profile.hca_link_layer
    models = {d.hca_type for d in compute if d.hca_type}
    return [d for d in devices(ctx) if d.role == "storage" and d.gpu_hops and layer
            and (not models or d.hca_type in models) and d.hca_type not in DPU_TYPES
            and layer not in {p.link_layer for p in d.ports}]


def _gpus_without_a_rail(ctx: CheckContext, compute: list[IbDevice]) -> list[str]:
    """GPUs on PCI that no compute NIC shares a PCIe bridge with, on boards where the
    rails sit beside their GPUs (some compute NIC does): where the missing NIC belonged."""
    if not any(d.gpu_hops for d in compute):
        return []
    near = {g for d in compute for g in d.gpu_hops}
    return sorted(d.bdf for d in ctx.snapshot.pci or [] if d.is_nvidia_gpu and d.bdf not in near)




@check("ib.hca_count", needs=("infiniband",), params=HcaCountParams,
       remedy="A compute HCA without an RDMA device: check `dmesg | grep mlx5` for a "
              "firmware or driver failure, `lspci -d 15b3:` for the card, and reboot; a card "
              "that stays missing needs reseating or an RMA. A rail on the wrong link layer "
              "(its port set to Ethernet on an InfiniBand fabric, or back): `mlxconfig -d "
              "DEV set LINK_TYPE_P1=1` (InfiniBand) or 2 (Ethernet) and reboot. When the "
              "count is right but the roles are not, recognise the compute NICs in the site "
              "profile (compute_ibdevs, compute_netdevs, compute_pci, compute_models) or "
              "name them in config: checks: {ib.hca_count: {compute_hcas: [...]}}.",
       actions=(Action.REBOOT, Action.FIX_CONFIG, Action.INVESTIGATE))
def hca_count(ctx: CheckContext) -> Iterator[Finding]:
    """The node has as many compute HCAs as its platform (8 on DGX H100, 4 on GB200);
    roles come from checks/core/rails.py, each with its reason in the inventory."""
    expected = ctx.profile.compute_hcas
    if expected is None:
        yield Finding.skip(NODE, "profile expects no compute HCAs")
        return
    devs = devices(ctx)
    compute_devs = [d for d in devs if d.role == "compute"]
    compute = sorted(d.name for d in compute_devs)
    observed: dict[str, Any] = {"compute": compute, "count": len(compute)}
    unknown = sorted(d.name for d in devs if d.role == "unknown")
    if unknown:
        observed["role_unknown"] = unknown
    orphans = _pci_without_rdma(ctx)
    if orphans:
        observed["pci_without_rdma_device"] = orphans
    if len(compute) < expected <= len(compute) + len(unknown):
        # The devices whose role could not be read would make up the count: clusterdiag
        # could not tell, so this is its trouble, never a missing HCA.
        reasons = "; ".join(f"{d.name}: {d.role_reason or 'role unknown'}"
                            for d in devs if d.role == "unknown")
        yield Finding.error(NODE, f"could not tell the compute HCAs: {reasons}")
    elif len(compute) < expected:
        yield _too_few(ctx, compute_devs, observed, expected)
    elif len(compute) > expected:
        yield Finding.warn(NODE, "more compute HCAs than the platform has: recognise them in "
                                 "the site profile (compute_*) or set compute_hcas in config",
                           observed, expected)
    else:
        yield Finding.passed(NODE, "compute HCA count as expected", observed, expected)


def _too_few(ctx: CheckContext, compute: list[IbDevice], observed: dict[str, Any],
             expected: int) -> Finding:
    """The fail, naming where the missing rails belong and what is there instead."""
    wrong = _wrong_mode_rails(ctx, compute)
    lonely = _gpus_without_a_rail(ctx, compute)
    if lonely:
        observed["gpus_without_a_compute_nic"] = lonely
    if wrong:
        observed["wrong_link_layer"] = {d.name: d.role_reason for d in wrong}
        names = ", ".join(f"{d.name} ({d.role_reason})" for d in wrong)
        return Finding.fail(NODE, f"fewer compute HCAs than the platform has: {names}",
                            observed, expected, Action.FIX_CONFIG)
    where = f": no compute NIC beside GPU {', '.join(lonely)}" if lonely else ""
    return Finding.fail(NODE, f"fewer compute HCAs than the platform has{where}", observed,
                        expected, Action.REBOOT)
