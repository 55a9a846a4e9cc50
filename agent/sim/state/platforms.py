"""What each simulated platform can have go wrong, read from its profile and its layout.

A fault kind says what hardware it needs (``FaultKind.needs``: an NVSwitch, InfiniBand
compute NICs, an NVL72 tray...), never which platforms: the platforms it applies to follow
from these capabilities. A new platform is its profile YAML (checks/profiles/) and its
simulated layout (layout.py ``LAYOUTS``, with its NICs in ``HCA_LAYOUTS``); it gets every
fault its hardware can have, with no list of names to extend.

The simulated platforms are the profiles with a layout, in ``LAYOUTS`` order: the first
that has what a kind needs is where the fault matrix (tests/integration/test_fault_matrix.py)
shows it.
"""

from __future__ import annotations

from functools import cache

from ....checks.catalogs.profile_data import PROFILES
from ....checks.core.finding import StrEnum
from ....checks.profiles.profile import builtin_names, load_profile
from .layout import HCA_LAYOUTS, LAYOUTS, OEM_HCA_LAYOUTS

# NVML_DEVICE_ARCH_HOPPER: GPU fabric info and SRAM ECC status start with it.
ARCH_HOPPER = 9
# NVML_DEVICE_ARCH_BLACKWELL: NVLink5, whose links answer bit error rates.
ARCH_BLACKWELL = 10


class Capability(StrEnum):
    NVLINK = "nvlink"  # NVLinks on every GPU (nvlinks_per_gpu)
    NVLINK5 = "nvlink5"  # NVLink5 links (Blackwell): per-link bit error rates
    NVLINK_SPEED = "nvlink_speed"  # the profile expects a per-link NVLink speed
    NVSWITCH = "nvswitch"  # an NVSwitch baseboard with Fabric Manager (HGX, not NVL72)
    NVSWITCH_PCI = "nvswitch_pci"  # its NVSwitches are PCI functions (nvswitch_count)
    # its NVSwitches are managed through ConnectX functions (nvswitch_mgmt_functions: B200)
    NVSWITCH_MGMT = "nvswitch_mgmt"
    NVL72 = "nvl72"  # a tray of a multi-node NVLink rack, with IMEX
    FABRIC_INFO = "fabric_info"  # NVML GPU fabric info: NVLink on Hopper or later
    SRAM_ECC = "sram_ecc"  # NVML SRAM ECC status: Hopper or later
    IB = "ib"  # InfiniBand compute NICs, which the simulator can also run as RoCE
    RAIL_PER_GPU = "rail_per_gpu"  # each compute NIC beside its GPU, on an x86 host
    OEM_LAYOUT = "oem_layout"  # an OEM server's NIC layout is simulated (layout: oem)
    C2C = "c2c"  # GPUs joined to a Grace CPU by NVLink-C2C (the NVL72 trays)


@cache
def capabilities(platform: str) -> frozenset[Capability]:
    """What ``platform`` (a simulated profile) has, from its profile and its layout."""
    profile, layout = load_profile(platform), LAYOUTS[platform]
    hopper = layout.architecture >= ARCH_HOPPER
    nvlink = profile.nvlinks_per_gpu > 0
    compute = [s for s in HCA_LAYOUTS.get(platform, ()) if s.role == "compute"]
    has = {
        Capability.NVLINK: nvlink,
        Capability.NVLINK5: nvlink and layout.architecture >= ARCH_BLACKWELL,
        Capability.NVLINK_SPEED: nvlink and profile.nvlink_link_speed_mbps is not None,
        Capability.NVSWITCH: profile.nvswitch and profile.fabric_manager,
        Capability.NVSWITCH_PCI: profile.nvswitch and bool(profile.nvswitch_count),
        Capability.NVSWITCH_MGMT: profile.nvswitch and bool(profile.nvswitch_mgmt_functions),
        Capability.NVL72: profile.nvl72 and profile.imex,
        Capability.FABRIC_INFO: nvlink and hopper,
        Capability.SRAM_ECC: hopper,
        Capability.IB: profile.hca_link_layer == "InfiniBand" and bool(compute),
        # A Grace tray has one NUMA node per GPU pair and its NICs SYS to every GPU.
        Capability.RAIL_PER_GPU: bool(compute) and not profile.nvl72
        and all(s.gpu_bdf is not None for s in compute),
        Capability.OEM_LAYOUT: platform in OEM_HCA_LAYOUTS,
        Capability.C2C: profile.nvl72,
    }
    return frozenset(c for c, present in has.items() if present)


def platforms_with(needs: frozenset[Capability]) -> tuple[str, ...]:
    """The simulated platforms that have every capability in ``needs``, in LAYOUTS order."""
    return tuple(p for p in LAYOUTS if needs <= capabilities(p))


def simulated_as(profile: str) -> str | None:
    """The simulated platform a built-in profile is built as: its own layout, else, for a
    baseboard (hgx-h100-8gpu), that of a chassis built on it (dgx-h100), whose GPUs,
    NVLinks and NVSwitches are the baseboard's (the NICs are the chassis's: a baseboard
    lays out none); None when neither."""
    if profile in LAYOUTS:
        return profile
    return next((name for name in LAYOUTS if _extends(name) == profile), None)


def _extends(name: str) -> object:
    """The profile the built-in ``name`` extends, as its YAML says (None when none)."""
    data = PROFILES.get(name)
    return data.get("extends") if isinstance(data, dict) else None


def unsimulated() -> list[str]:
    """The built-in profiles, generic aside, that nothing simulates: each wants its layout
    in layout.py (LAYOUTS, and its NICs in HCA_LAYOUTS)."""
    return [name for name in builtin_names()
            if name != "generic" and simulated_as(name) is None]
