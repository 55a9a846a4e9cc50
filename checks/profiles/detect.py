"""Which platform profile a node is, from evidence in the snapshot — or ``generic``.

Guessing wrong is worse than not guessing: a DGX with a GPU missing must not be judged
as some 7-GPU platform, and a GH200 is not an H200. Only an unambiguous match wins.

The evidence, strongest first: the DMI product (a DGX says so); then the baseboard, from
what a missing GPU cannot remove — the NVSwitches on PCI (an HGX 8-GPU board has its 4
or 6 whether or not every GPU enumerates; on HGX B200, whose NVSwitches are no PCI
functions, the ConnectX-7 functions they are managed through: VPD SMDL=SW_MNG, counted
whatever their number, since the marker exists only on such boards) and the GPU model
(NVML's name, or the PCI device id where NVML cannot answer) — so an OEM HGX H100 with
a GPU gone is judged as ``hgx-h100-8gpu`` and gpu.count fails naming it, not as
``generic``, which would pass it; then the number of GPUs (a B200 whose VPD could not be
read, by an unprivileged agent, still matches its board by its 8 GPUs). A profile with
DMI names is a chassis and needs its name. A VM holding some of a board's GPUs and no
NVSwitch (a one-GPU H200 VM) matches nothing and stays ``generic``, with host.profile's
warning.

Several profiles matching the deciding evidence (a site profile beside the built-in it
extends, a DGX beside its HGX baseboard when no DMI name decides) narrow to the most
specific: the one deepest in its ``extends`` chain, so a file added to ``profile_dir``
never makes detection fall to a less specific profile whose checks skip what its base
judges (a DGX H100's capture judged by the NIC-less HGX baseboard would pass a half-rate
port). Equally deep matches are a tie, and no evidence says which of them the node is:
two site profiles extending ``dgx-h100`` may expect InfiniBand and Ethernet. A tie is
not confident and judges by what the tied profiles agree on, the deepest profile they
all extend (``dgx-h100`` there, so the captured profile's base still runs its checks),
else ``generic``; host.profile warns naming them. The order of the profiles (files,
dicts) never decides.
"""

from __future__ import annotations

from ...agent.model import Snapshot
from ...agent.model.ib import nvswitch_management
from ...agent.model.record import record
from .profile import Profile, lineage, load_profile, profile_names


@record(frozen=True)
class Detection:
    name: str
    reason: str
    confident: bool
    # The chosen profile, then every other one the deciding evidence matched, most
    # specific first.
    matched: tuple[str, ...] = ()
    # The most specific matches, by name: more than one is a tie.
    tied: tuple[str, ...] = ()


def detect_profile(snap: Snapshot) -> Detection:
    pci_gpus = [d for d in snap.pci or [] if d.is_nvidia_gpu]
    nvswitches = [d for d in snap.pci or [] if d.is_nvswitch]
    nvml_gpus = snap.nvml.gpus if snap.nvml else []
    if not pci_gpus and not nvml_gpus:
        return Detection("generic", "no NVIDIA GPU on this node", True)
    models = {g.name for g in nvml_gpus if g.name}
    ids = {f"0x{d.device:04x}" for d in pci_gpus}
    if not models and len(ids) == 1:
        # NVML could not say (no driver, nvmlInit failed): the PCI device id can.
        (pci_id,) = ids
        model = f"PCI device {pci_id}"
        candidates = [load_profile(n) for n in profile_names()
                      if pci_id in load_profile(n).gpu_pci_ids]
    elif len(models) != 1:
        why = "NVML named no GPU model" if not models else f"mixed GPU models {sorted(models)}"
        return Detection("generic", why, False)
    else:
        (model,) = models
        candidates = [load_profile(n) for n in profile_names()
                      if model in load_profile(n).gpu_models]
    if not candidates:
        return Detection("generic", f"no profile for GPU model {model!r}", False)
    count_nvml, count_pci = len(nvml_gpus), len(pci_gpus)
    product = (snap.host.dmi_product_name if snap.host else None) or ""
    by_dmi = [p for p in candidates if _dmi_names(p, product)]
    if by_dmi:
        # The chassis says what it is, whatever number of GPUs still answers: a DGX H100
        # with a GPU off the bus is a DGX H100 short of a GPU (gpu.count fails), not a
        # 7-GPU platform judged against nothing.
        return _most_specific(by_dmi, f"DMI product {product!r}, {count_nvml} x {model}")
    managers = [d.name for d in snap.infiniband or [] if nvswitch_management(d)]
    if nvswitches or managers:
        boards = _baseboards(candidates, len(nvswitches), bool(managers),
                             max(count_nvml, count_pci))
        if boards:
            switches = (f"{len(nvswitches)} NVSwitches on PCI" if nvswitches else
                        f"{len(managers)} NVSwitch management functions (VPD SMDL=SW_MNG)")
            room = {p.gpu_count for p in boards}
            of = f" of {room.pop()}" if len(room) == 1 else ""
            return _most_specific(boards, f"{switches}, {count_nvml}{of} x {model} in NVML, "
                                          f"{count_pci} on PCI")
    if snap.pci is not None and count_pci != count_nvml:
        return Detection("generic", f"{count_pci} GPUs on PCI but {count_nvml} in NVML", False)
    fits = [p for p in candidates if p.gpu_count == count_nvml]
    if snap.pci is not None:
        # A VPD that could not be read (an unprivileged agent) hides managers, not GPUs.
        unread = any("vpd" in d.unknown for d in snap.infiniband or [])
        fits = [p for p in fits if p.nvswitch == bool(nvswitches or managers) or p.nvl72
                or (unread and not nvswitches and bool(p.nvswitch_mgmt_functions))
                or _switches_unseen(p)]
    fits = [p for p in fits if not p.dmi_products] or fits
    if not fits:
        names = sorted(p.name for p in candidates)
        return Detection("generic", f"{count_nvml} x {model} matches none of {names}", False)
    return _most_specific(fits, f"{count_nvml} x {model}"
                                f"{', NVSwitch on PCI' if nvswitches else ''}")


def _most_specific(matches: list[Profile], evidence: str) -> Detection:
    """The most specific of the profiles ``evidence`` matched: the deepest in its
    ``extends`` chain (a site profile over the built-in it extends, a DGX over its HGX
    baseboard). Equally deep ones are a tie (not confident), judged against the deepest
    profile they all extend, else ``generic``. The reason names what was passed over
    and, for a tie, the profiles tied."""
    ranked = sorted(matches, key=lambda p: (-len(lineage(p)), p.name))
    chosen = ranked[0]
    depth = len(lineage(chosen))
    tied = tuple(p.name for p in ranked if len(lineage(p)) == depth)
    matched = tuple(p.name for p in ranked)
    if len(tied) > 1:
        base = _shared_base(ranked[:len(tied)])
        judged = (f"{base}, which they all extend" if base is not None
                  else "generic, since they extend no profile in common")
        why = (f"; {', '.join(tied)} match equally ({depth} deep in 'extends'): judged "
               f"against {judged}")
        name = base or "generic"
        return Detection(name, evidence + why, False,
                         (name, *(n for n in matched if n != name)), tied)
    if len(matched) > 1:
        chain = " -> ".join((chosen.name, *lineage(chosen)))
        why = f"; the most specific of {', '.join(matched)} ({chain})"
    else:
        why = ""
    return Detection(chosen.name, evidence + why, True, matched, tied)


def _shared_base(profiles: list[Profile]) -> str | None:
    """The deepest profile every one of ``profiles`` extends, or None."""
    shared = set.intersection(*(set(lineage(p)) for p in profiles))
    return next((name for name in lineage(profiles[0]) if name in shared), None)


def _baseboards(candidates: list[Profile], switches: int, managed: bool,
                gpus_seen: int) -> list[Profile]:
    """The baseboard profiles (no DMI names) with this many NVSwitches on PCI, or whose
    NVSwitches are managed through ConnectX functions when such are seen, and with room
    for the GPUs seen."""
    return [p for p in candidates if not p.dmi_products and p.gpu_count is not None
            and gpus_seen <= p.gpu_count
            and (p.nvswitch_count == switches if switches
                 else managed and bool(p.nvswitch_mgmt_functions))]


def _dmi_names(profile: Profile, product: str) -> bool:
    return bool(product) and any(d.lower() in product.lower() for d in profile.dmi_products)


def _switches_unseen(profile: Profile) -> bool:
    """A board whose NVSwitches the host is not known to see at all (HGX B300: neither PCI
    functions nor management functions are published), so that their absence from the
    snapshot says nothing and the GPU model and count decide."""
    return (profile.nvswitch and profile.nvswitch_count is None
            and not profile.nvswitch_mgmt_functions)
