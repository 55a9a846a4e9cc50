"""nccl.gpu_nic_affinity: each GPU's compute NIC sits on its NUMA node."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from ..core.topology import Endpoint, gpus, nics, pair, pci_nics, rank
from .helpers import NODE


def _numa(end: Endpoint) -> int | None:
    numa = end.pci.numa_node if end.pci else None
    return numa if numa is not None and numa >= 0 else None


@check("nccl.gpu_nic_affinity", needs=("pci", "infiniband"),
       remedy="Compare with nvidia-smi topo -m: a GPU without its NIC at PIX/PXB sends "
              "through another GPU (PXN) or the CPU; a NIC on the wrong NUMA node usually "
              "means a BIOS/firmware table error (numa_node in sysfs) or a NIC in a wrong slot.",
       actions=(Action.INVESTIGATE,))
def gpu_nic_affinity(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU has a compute NIC at the PCIe distance its profile expects, on its NUMA node.

    Nearer than the profile's farthest accepted class is fine (a GB200 tray accepts SYS).
    """
    expected = ctx.profile.gpu_nic_distance
    snap = ctx.snapshot
    if not expected:
        yield Finding.skip(NODE, f"profile {ctx.profile.name} expects no GPU-NIC placement")
        return
    all_nics = nics(snap)
    compute = [n for n in all_nics if n.role == "compute"] or [
        n for n in all_nics if n.role == "unknown"]
    gpu_list = gpus(snap)
    if not gpu_list or not compute:
        yield Finding.skip(NODE, "no GPU or no compute NIC found (see gpu.count, ib.hca_count)")
        return
    known = {n.bdf for n in all_nics}
    orphans = [n for n in pci_nics(snap) if n.bdf not in known]

    def acceptable(level: str) -> bool:
        return rank(level) <= max(rank(e) for e in expected)

    chosen: dict[str, str] = {}
    bad = False
    for gpu in gpu_list:
        distance = {nic.name: pair(gpu, nic) for nic in compute}
        best = min(distance.values(), key=rank)
        near = [n for n in compute if distance[n.name] == best]
        nic = next((n for n in near if _numa(n) == _numa(gpu)), near[0])
        chosen[gpu.name] = f"{nic.name} {best}"
        if not acceptable(best):
            bad = True
            if any(acceptable(pair(gpu, n)) for n in orphans):
                yield Finding.skip(gpu.name, "its NIC is on the bus without an RDMA device "
                                   "(see ib.hca_count)")
                continue
            if any(acceptable(pair(gpu, n)) for n in all_nics if n.role != "compute"):
                yield Finding.skip(gpu.name, "the NIC beside it is not a compute rail (see "
                                   "ib.hca_count)")
                continue
            yield Finding.fail(gpu.name, "no compute NIC at the PCIe distance this platform "
                               "expects", distance, list(expected), Action.INVESTIGATE)
        elif None not in (_numa(gpu), _numa(nic)) and _numa(gpu) != _numa(nic):
            bad = True
            yield Finding.warn(nic.name, "compute NIC on a different NUMA node from the GPU it "
                               "serves", {gpu.name: _numa(gpu), nic.name: _numa(nic)},
                               "same NUMA node", Action.INVESTIGATE)
    if not bad:
        yield Finding.passed(NODE, "every GPU has a compute NIC at the expected distance on "
                             "its NUMA node", chosen, list(expected))
