"""Which RDMA devices are compute rails: decided from the PCI tree, never from names.

ibdev names differ between machines of the same model (one real H100 node has
mlx5_0,1,4-9 as its compute NICs; the DGX H100 guide lists mlx5_0,3,4,5,6,9,10,11), so
the decision uses what the hardware shows, in this order:

1. Config: ``checks: {ib.hca_count: {compute_hcas: [...]}}`` names the compute devices
   by ibdev name or node GUID; ``storage_hcas`` / ``management_hcas`` name the others.
   When ``compute_hcas`` is given, nothing else is compute.
2. PCIe affinity: a device that shares a PCIe switch or root port with an NVIDIA GPU is
   a compute rail (HGX boards put one NIC under each GPU's switch). Its link layer does
   not change that: a compute NIC that came up as Ethernet is a misconfigured rail for
   ``ib.link_layer`` to report, not a storage port.
3. Where no device shares a switch with a GPU (GB200/GB300 trays, where every NIC is
   SYS to the GPUs; VMs; a tree without PCI links), an InfiniBand port that is not a
   BlueField DPU is a compute rail, and everything else is not.

Everything not compute is "storage" (the non-GPU NICs of these platforms serve storage
and in-band management) unless config says "management"; "unknown" when even the link
layer could not be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# hca_type is "MT" + the PCI device id in decimal: 0xa2d6 BlueField-2, 0xa2dc BlueField-3
# (hardware.md §3.1: MT41692 = BlueField-3 on the real H100 node).
DPU_TYPES = frozenset({"MT41686", "MT41692"})


@dataclass(frozen=True)
class Candidate:
    """What the role decision looks at for one device."""

    name: str
    node_guid: str | None
    hca_type: str | None
    pci_path: tuple[str, ...]  # bdfs from the root port down to the device; () when unknown
    link_layers: tuple[str | None, ...]


@dataclass(frozen=True)
class Role:
    role: str
    reason: str


def _guid_key(guid: str) -> str:
    return guid.lower().replace(":", "").removeprefix("0x")


def _listed(cand: Candidate, names: Iterable[str]) -> bool:
    wanted = {str(n) for n in names}
    guids = {_guid_key(n) for n in wanted}
    return cand.name in wanted or (cand.node_guid is not None
                                   and _guid_key(cand.node_guid) in guids)


def gpu_neighbour(path: Sequence[str], gpu_paths: Iterable[Sequence[str]]) -> str | None:
    """The GPU that shares a bridge (switch port or root port) with ``path``, if any."""
    bridges = set(path[:-1])
    for gpu in gpu_paths:
        if bridges & set(gpu[:-1]):
            return gpu[-1]
    return None


def _fallback(cand: Candidate, why: str) -> Role:
    if "InfiniBand" in cand.link_layers:
        if cand.hca_type in DPU_TYPES:
            return Role("storage", f"BlueField DPU ({cand.hca_type}); {why}")
        return Role("compute", f"InfiniBand link layer; {why}")
    if all(layer is None for layer in cand.link_layers):
        return Role("unknown", f"link layer unreadable; {why}")
    return Role("storage", f"not InfiniBand; {why}")


def decide(cands: Sequence[Candidate], gpu_paths: Sequence[Sequence[str]],
           compute: Sequence[str], storage: Sequence[str], management: Sequence[str]
           ) -> dict[str, Role]:
    """The role of every candidate, with the reason a person can check."""
    roles: dict[str, Role] = {}
    neighbours = {c.name: gpu_neighbour(c.pci_path, gpu_paths) if c.pci_path else None
                  for c in cands}
    any_affinity = any(neighbours.values())
    for cand in cands:
        if _listed(cand, management):
            roles[cand.name] = Role("management", "named in config (management_hcas)")
        elif _listed(cand, storage):
            roles[cand.name] = Role("storage", "named in config (storage_hcas)")
        elif compute:
            roles[cand.name] = (Role("compute", "named in config (compute_hcas)")
                                if _listed(cand, compute)
                                else Role("storage", "not named in config (compute_hcas)"))
        elif neighbours[cand.name]:
            roles[cand.name] = Role("compute", f"shares a PCIe bridge with GPU "
                                               f"{neighbours[cand.name]}")
        elif any_affinity:
            roles[cand.name] = Role("storage", "no GPU under its PCIe root port")
        elif not gpu_paths:
            roles[cand.name] = _fallback(cand, "no GPU on PCI to pair with")
        elif not cand.pci_path:
            roles[cand.name] = _fallback(cand, "no PCI path to pair with a GPU")
        else:
            roles[cand.name] = _fallback(cand, "every NIC is SYS to the GPUs")
    return roles
