"""Which RDMA devices are compute rails: decided when judging, from the facts a snapshot
records (link layer, PCIe hops to each GPU, model, GUID, names), against the profile.

The collector records facts only, so a snapshot re-judged under another profile (a RoCE
site profile, an OEM board's) re-derives every role. The rules, in order; the first that
applies decides, and its reason is what ``topo`` and the report show:

1. Config: ``checks: {ib.hca_count: {compute_hcas: [...]}}`` names the compute devices by
   ibdev name or node GUID, ``storage_hcas`` / ``management_hcas`` the others. When
   ``compute_hcas`` is given, nothing else is compute.
2. The profile's recognition keys (``compute_pci``, ``compute_guids``, ``compute_ibdevs``,
   ``compute_netdevs`` — shell globs — and ``compute_models``, the ``hca_type``): when any
   is set, a device is compute exactly when it matches one of them.
3. A BlueField DPU (hca_type MT41686, MT41692) is storage: it serves the host's north-south
   network, never NCCL's rails.
4. The profile's compute fabric (``hca_link_layer``): a device whose ports run another link
   layer is storage wherever it sits — an Ethernet storage NIC under a GPU's PCIe switch,
   as OEM HGX boards place them, is not a rail. When more devices run the fabric's link
   layer than the profile has compute HCAs, the nearest to each GPU by PCIe hops is compute
   (the faster port between two equally near) and the rest storage, and the reason says so.
5. A profile that states no link layer (generic, the HGX baseboards): PCIe affinity — a
   device that shares a PCIe bridge with a GPU is compute, unless it runs another link
   layer than most such devices do (the rails' link layer, read off the board); where none
   does (GB200 trays, VMs), an InfiniBand port that is not a DPU is.

Before rules 2-5, whatever the profile: a function whose VPD says ``SMDL=SW_MNG`` is
``management``, neither compute nor storage — the ConnectX-7 functions through which an
HGX/DGX B200 or B300 baseboard's NVSwitches are managed (agent/model/ib.py gives the
sources), which appear as ``mlx5_*`` InfiniBand devices like the rails. Only config's own
lists (rule 1's storage and management names) come first. A VPD that could not be read
(EACCES for an unprivileged agent, a read past the deadline) decides nothing: the other
rules decide, and the reason says the VPD was unread, so an unread file never makes a
role that fails the node.

A device whose link layer could not be read is ``unknown`` (ib.hca_count then cannot tell
a missing rail from an unreadable one); one whose every file is missing (unplugged after
the listing) is gone, so not a rail. The port rate only breaks ties, since a rail that
trained down must stay a rail for ib.rate to fail it.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Iterable, Sequence

from ...agent.model import Snapshot
from ...agent.model.ib import DPU_TYPES, IbDevice, nvswitch_management
from ...agent.model.record import record
from ..profiles.profile import Profile
from .params import Params, param, parameters


@parameters
class HcaCountParams(Params):
    """ib.hca_count's parameters, read here too: the config's own lists of compute, storage
    and management devices come before every other rule."""

    compute_hcas: tuple[str, ...] = param(
        (), doc="the compute rails by RDMA device name, overriding the profile's "
        "recognition (checks/core/rails.py)")
    storage_hcas: tuple[str, ...] = param((), doc="the storage NICs by RDMA device name")
    management_hcas: tuple[str, ...] = param(
        (), doc="the management NICs by RDMA device name")


@record(frozen=True)
class Role:
    role: str
    reason: str


def guid_key(guid: str) -> str:
    return guid.lower().replace(":", "").removeprefix("0x")


def listed(dev: IbDevice, names: Iterable[str]) -> bool:
    """Whether config's list names ``dev`` by ibdev name or node GUID."""
    wanted = {str(n) for n in names}
    guids = {guid_key(n) for n in wanted}
    return dev.name in wanted or (dev.node_guid is not None and guid_key(dev.node_guid) in guids)


def link_layers(dev: IbDevice) -> set[str]:
    return {p.link_layer for p in dev.ports if p.link_layer in ("InfiniBand", "Ethernet")}


def _recognised(dev: IbDevice, profile: Profile) -> str | None:
    """Which recognition key of the profile ``dev`` matches, or None."""
    checks: list[tuple[str, tuple[str, ...], list[str]]] = [
        ("compute_pci", profile.compute_pci, [dev.pci_bdf or ""]),
        ("compute_guids", tuple(guid_key(g) for g in profile.compute_guids),
         [guid_key(dev.node_guid or "")]),
        ("compute_ibdevs", profile.compute_ibdevs, [dev.name]),
        ("compute_netdevs", profile.compute_netdevs, [p.netdev or "" for p in dev.ports]),
        ("compute_models", profile.compute_models, [dev.hca_type or ""]),
    ]
    for key, patterns, values in checks:
        for pattern in patterns:
            if any(value and fnmatch.fnmatchcase(value, pattern) for value in values):
                return f"{key} {pattern}"
    return None


def _gone(dev: IbDevice) -> bool:
    """Listed, but nothing of it is there any more (hot-unplugged between the listing and
    the reads): absent, which is not the same as unreadable."""
    return not dev.ports and dev.pci_bdf is None and bool(dev.unknown) and all(
        reason == "missing" for key, reason in dev.unknown.items() if key != "pci_bdf")


def has_recognition_keys(profile: Profile) -> bool:
    return bool(profile.compute_pci or profile.compute_guids or profile.compute_ibdevs
                or profile.compute_netdevs or profile.compute_models)


def _nearest(dev: IbDevice) -> tuple[str, int] | None:
    if not dev.gpu_hops:
        return None
    gpu = min(dev.gpu_hops, key=lambda g: (dev.gpu_hops[g], g))
    return gpu, dev.gpu_hops[gpu]


def _by_affinity(devs: Sequence[IbDevice]) -> dict[str, Role]:
    """Rule 5: the profile states no compute fabric. The link layer most devices beside a
    GPU run is the rails' (8 InfiniBand rails beside 2 Ethernet storage ports under the
    same switches on an OEM board): a device beside a GPU on another one is storage."""
    roles = {}
    beside = Counter(layer for d in devs if d.gpu_hops for layer in link_layers(d))
    rails = beside.most_common(1)[0][0] if beside else None
    for dev in devs:
        near = _nearest(dev)
        layers = link_layers(dev)
        if near is not None and (rails is None or rails in layers or not layers):
            unread = "; link layer unreadable" if not layers else ""
            roles[dev.name] = Role("compute", f"shares a PCIe bridge with GPU {near[0]}"
                                              f"{unread}")
        elif near is not None:
            roles[dev.name] = Role("storage", f"runs {'/'.join(sorted(layers)) or 'unknown'} "
                                              f"beside GPU {near[0]}; the rails beside the "
                                              f"GPUs run {rails}")
        elif beside:
            roles[dev.name] = Role("storage", "no GPU under its PCIe bridges")
        elif "InfiniBand" in layers:
            roles[dev.name] = Role("compute", "InfiniBand link layer; no NIC shares a PCIe "
                                              "bridge with a GPU")
        elif not layers:
            roles[dev.name] = Role("unknown", "link layer unreadable")
        else:
            roles[dev.name] = Role("storage", "not InfiniBand; no NIC shares a PCIe bridge "
                                              "with a GPU")
    return roles


def _rate(dev: IbDevice) -> float:
    return max((p.rate_gbps or 0.0 for p in dev.ports), default=0.0)


def _by_fabric(devs: Sequence[IbDevice], layer: str, wanted: int | None) -> dict[str, Role]:
    """Rule 4: the devices on the profile's link layer, one per GPU when there are too many."""
    roles: dict[str, Role] = {}
    fabric, unread = [], []
    for dev in devs:
        layers = link_layers(dev)
        if not layers:
            unread.append(dev)
        elif layer not in layers:
            where = _nearest(dev)
            beside = f" (beside GPU {where[0]})" if where else ""
            roles[dev.name] = Role("storage", f"runs {'/'.join(sorted(layers))}{beside}, not "
                                              f"the compute fabric's {layer}")
        else:
            fabric.append(dev)
    # A port whose link layer could not be read, beside a GPU and of the rails' model, is
    # taken for the rail it stands where: its own checks then say what is unreadable.
    models = {d.hca_type for d in fabric if d.hca_type}
    for dev in unread:
        spot = _nearest(dev)
        if spot is not None and dev.hca_type in models:
            roles[dev.name] = Role("compute", f"link layer unreadable; beside GPU {spot[0]}, "
                                              f"of the rails' model {dev.hca_type}")
        else:
            roles[dev.name] = Role("unknown", "link layer unreadable")
    if wanted is None or len(fabric) <= wanted or not any(d.gpu_hops for d in fabric):
        for dev in fabric:
            roles[dev.name] = Role("compute", f"{layer} link layer, the compute fabric's")
        return roles
    gpus = sorted({g for d in fabric for g in d.gpu_hops})
    chosen: dict[str, str] = {}
    for gpu in gpus:
        # Nearest first; between two under one switch, the faster port (a 400G rail
        # beside a 100G storage port).
        ranked = sorted((d.gpu_hops[gpu], -_rate(d), d.name) for d in fabric
                        if gpu in d.gpu_hops and d.name not in chosen)
        if ranked and len(chosen) < wanted:
            hops, _, name = ranked[0]
            chosen[name] = f"{layer}, the nearest to GPU {gpu} ({hops} PCIe hops)"
    for dev in fabric:
        roles[dev.name] = (Role("compute", chosen[dev.name]) if dev.name in chosen else Role(
            "storage", f"{len(fabric)} {layer} NICs for the profile's {wanted} compute "
                       "rails, and not the nearest to any GPU"))
    return roles


def decide(devs: Sequence[IbDevice], profile: Profile, params: HcaCountParams | None = None
           ) -> dict[str, Role]:
    """The role of every device, with the reason a person can check; ``params`` are
    ib.hca_count's (the config's compute/storage/management lists)."""
    named = params or HcaCountParams()
    compute, storage = list(named.compute_hcas), list(named.storage_hcas)
    management = list(named.management_hcas)
    roles: dict[str, Role] = {}
    rest = []
    for dev in devs:
        if _gone(dev):
            roles[dev.name] = Role("storage", "not a rail: its sysfs directory is gone "
                                              "(every file missing)")
        elif listed(dev, management):
            roles[dev.name] = Role("management", "named in config (management_hcas)")
        elif listed(dev, storage):
            roles[dev.name] = Role("storage", "named in config (storage_hcas)")
        elif nvswitch_management(dev):
            roles[dev.name] = Role("management", "NVSwitch management function (VPD "
                                                  "SMDL=SW_MNG): not a rail")
        elif compute:
            roles[dev.name] = (Role("compute", "named in config (compute_hcas)")
                               if listed(dev, compute)
                               else Role("storage", "not named in config (compute_hcas)"))
        elif has_recognition_keys(profile):
            key = _recognised(dev, profile)
            roles[dev.name] = (Role("compute", f"matches the profile's {key}") if key else
                               Role("storage", "matches none of the profile's compute_* keys"))
        elif dev.hca_type in DPU_TYPES:
            roles[dev.name] = Role("storage", f"BlueField DPU ({dev.hca_type})")
        else:
            rest.append(dev)
    layer = profile.hca_link_layer
    roles.update(_by_fabric(rest, layer, profile.compute_hcas) if layer else _by_affinity(rest))
    for dev in devs if profile.nvswitch_mgmt_functions else ():
        unread = dev.unknown.get("vpd")
        if unread and roles[dev.name].role != "management":
            role = roles[dev.name]
            roles[dev.name] = Role(role.role, f"{role.reason}; VPD unread ({unread}), so "
                                              "not known to be no NVSwitch management function")
    return roles


def assign(snap: Snapshot, profile: Profile, params: HcaCountParams | None = None) -> None:
    """Set every device's ``role`` and ``role_reason`` for this judgement."""
    devs = snap.infiniband or []
    roles = decide(devs, profile, params)
    for dev in devs:
        dev.role, dev.role_reason = roles[dev.name].role, roles[dev.name].reason
