"""Platform profiles: what a healthy node of a given kind has, loaded from YAML data.

Profiles are data, not code, so a site can read them (``clusterdiag profiles show``)
and the numbers carry their sources as comments in the YAML files. What runs reads them
from ``profile_data.py``, generated from those files (``python -m clusterdiag.checks.core.index
--write``; a test fails while it is stale): PyYAML's import alone costs the prolog about
three interpreter starts.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any, cast

from ...agent.base.plain import plain_copy
from ...agent.model.record import field, fields, record, replace
from ..catalogs.manifest import ACTIVE
from ..catalogs.profile_data import PROFILES


class UnknownProfileError(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown profile {name!r}; known: {', '.join(profile_names())}")


@record(frozen=True)
class Profile:
    name: str
    description: str = ""
    provisional: bool = False  # no real capture confirms every number
    # The profile this one starts from (its YAML's ``extends:``), None for a root: detection
    # ranks a profile deeper in this chain as more specific (checks/profiles/detect.py).
    extends: str | None = None
    dmi_products: tuple[str, ...] = ()
    # GPUs
    gpu_models: tuple[str, ...] = ()  # exact NVML names
    # PCI device ids of the GPU ("0x2330"): the model where NVML cannot say (pci.ids).
    gpu_pci_ids: tuple[str, ...] = ()
    gpu_count: int | None = None
    gpu_memory_gib: int | None = None
    gpu_pcie_gen: int | None = None
    gpu_pcie_width: int | None = None
    gpu_power_limit_w: int | None = None
    # The SM clock the GPUs run at when nobody capped them, MHz (their maximum): an
    # applications clock set below it is a straggler (gpu.clocks).
    sm_clock_mhz: int | None = None
    # NVLink and fabric
    nvlinks_per_gpu: int = 0
    nvlink_version: int | None = None  # NVML enum (6 = NVLink 4)
    # Each fully active link's speed, MB/s, as NVML_FI_DEV_NVLINK_GET_SPEED answers it
    # (nvlink.speed); None: not judged.
    nvlink_link_speed_mbps: int | None = None
    # How many other GPUs of the node each GPU reaches over NVLink, where that is not
    # every one of them: 1 on cards bridged in pairs (H100 NVL), whose GPUs of different
    # pairs talk over PCIe by design. None: every GPU pair (NVSwitch boards, NVL72).
    nvlink_peers: int | None = None
    nvswitch: bool = False
    nvswitch_count: int | None = None  # NVSwitch PCI functions (class 0x0680)
    # Boards whose NVSwitches are no PCI functions (HGX/DGX B200): the ConnectX-7
    # functions their NVSwitches are managed through, VPD SMDL=SW_MNG (checks/core/rails.py).
    nvswitch_mgmt_functions: int | None = None
    fabric_manager: bool = False
    nvl72: bool = False
    imex: bool = False
    # Who runs IMEX on the trays (fabric.imex): ``host`` (the nvidia-imex service: Slurm
    # sites, and the DRA driver with its HostManagedIMEXDaemon gate), ``dra`` (the DRA
    # driver's ComputeDomains start it; a host service is then the fault), ``per_job``
    # (started for each job: outside one only the channel devices are judged), or
    # ``auto``: ``dra`` where the DRA driver's kubelet plugin runs, else ``host``.
    imex_mode: str = "auto"
    # networking
    compute_hcas: int | None = None
    hca_rate_gbps: float | None = None
    hca_link_layer: str | None = None
    nic_pcie_gen: int | None = None
    nic_pcie_width: int | None = None
    # How compute NICs are recognised (checks/core/rails.py): when any is set, a device is a
    # compute rail exactly when it matches one (PCI address, node GUID, ibdev or netdev name
    # as shell globs, hca_type such as MT4129).
    compute_pci: tuple[str, ...] = ()
    compute_guids: tuple[str, ...] = ()
    compute_ibdevs: tuple[str, ...] = ()
    compute_netdevs: tuple[str, ...] = ()
    compute_models: tuple[str, ...] = ()
    # A RoCE compute fabric (hca_link_layer: Ethernet; checks/ib/roce.py): the one lossless
    # priority (PFC and ECN on it, NCCL_IB_TC mapped to it), how the NICs classify traffic
    # into priorities (dscp | pcp), and the least MTU of the compute netdevs.
    roce_priority: int | None = None
    roce_trust: str | None = None
    roce_mtu: int | None = None
    gpu_nic_distance: tuple[str, ...] = ()  # acceptable nvidia-smi topo levels to its own NIC
    # The versions a healthy node of the site runs (``profiles capture`` records them):
    # another version warns (host.versions), never fails — an upgrade in progress is no
    # broken node.
    driver_versions: tuple[str, ...] = ()  # NVIDIA driver (nvmlSystemGetDriverVersion)
    vbios_versions: tuple[str, ...] = ()  # GPU VBIOS (nvmlDeviceGetVbiosVersion)
    nic_firmware: tuple[str, ...] = ()  # the compute NICs' fw_ver
    allreduce_busbw_gbps: float | None = None
    # Active tests (clusterdiag qualify): test -> {expected, floor, unit, source}
    qualify: dict[str, dict[str, Any]] = field(default_factory=dict)
    # gpu_burn in doubles (-d): false where FP64 is vestigial (Blackwell Ultra: 1.25 TFLOPS),
    # so that a burn of a few seconds still completes its batches and prints a rate.
    gpu_burn_doubles: bool = True
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def has_expectations(self) -> bool:
        return bool(self.gpu_models or self.gpu_count)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


IMEX_MODES = ("auto", "host", "dra", "per_job")
"""The values of a profile's ``imex_mode``."""

QUALIFY_KEYS = ("unit", "expected", "floor", "source")
"""What a ``qualify:`` entry holds: the unit the test's tool prints (as its declaration says),
the healthy figure and the floor in that unit, and where the numbers come from."""


def did_you_mean(word: str, choices: list[str], prefix: str = "") -> str:
    """`` (did you mean 'PREFIX+choice'?)`` for the choice closest to ``word``, or ``""``."""
    import difflib  # only for an error

    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def _positive(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def qualify_problem(qualify: Any) -> str | None:
    """Why a profile's ``qualify:`` section is none, or None: one phrase that names the key.

    Each key is an active test's id (checks/qualify/active.py, read from the manifest); its
    ``unit`` is the unit that test's tool prints, so that a figure is never compared with a
    number counted otherwise (an HBM floor in read+write bytes against nvbandwidth's copy
    rate drains every healthy GPU); ``expected`` and ``floor`` are positive finite numbers
    in that unit, the floor no higher than the expected figure; and a ``source`` says where
    they come from. A test with no figure (DCGM's diagnostic) takes no entry."""
    if not isinstance(qualify, dict):
        return f"key 'qualify' must map test ids to mappings, got {type(qualify).__name__}"
    for test, entry in qualify.items():
        name = f"qualify.{test}"
        declared = ACTIVE.get(test) if isinstance(test, str) else None
        if declared is None:
            return f"unknown key {name!r}" + did_you_mean(str(test), list(ACTIVE), "qualify.")
        if not declared["unit"]:
            return f"key {name!r}: {test} has no figure to expect (pass or fail only)"
        if not isinstance(entry, dict):
            return f"key {name!r} must be a mapping of {', '.join(QUALIFY_KEYS)}"
        for key in entry:
            if key not in QUALIFY_KEYS:
                return f"unknown key '{name}.{key}'" + did_you_mean(
                    str(key), list(QUALIFY_KEYS), f"{name}.")
        if entry.get("unit") != declared["unit"]:
            return (f"key '{name}.unit' must be {declared['unit']!r}, the unit "
                    f"{declared['invocation']['program']} prints, got {entry.get('unit')!r}")
        numbers = {k: entry[k] for k in ("expected", "floor") if k in entry}
        if not numbers:
            return f"key {name!r} needs an expected figure, a floor or both"
        for key, value in numbers.items():
            if not _positive(value):
                return (f"key '{name}.{key}' must be a positive finite number, got "
                        f"{repr(value)[:40]}")
        if len(numbers) == 2 and numbers["floor"] > numbers["expected"]:
            return (f"key '{name}.floor' ({numbers['floor']:g}) is above "
                    f"'{name}.expected' ({numbers['expected']:g})")
        source = entry.get("source")
        if not isinstance(source, str) or not source.strip():
            return f"key '{name}.source' must say where the numbers come from"
    return None


_TUPLE_FIELDS = {"dmi_products", "gpu_models", "gpu_pci_ids", "gpu_nic_distance", "compute_pci",
                 "compute_guids", "compute_ibdevs", "compute_netdevs", "compute_models",
                 "driver_versions", "vbios_versions", "nic_firmware"}


# Site profiles (agent/settings/site_profiles.py: YAML files that extend these), by name. A run
# names its profile by a string that travels through the run options, the daemon and the
# Slurm entry points, so the site's are registered once per process, beside the built-ins,
# where every one of them resolves names.
_SITE: dict[str, Profile] = {}


def add_site_profiles(profiles: dict[str, Profile]) -> None:
    """Make ``profiles`` resolvable by name, beside the built-in ones."""
    _SITE.update(profiles)
    profile_names.cache_clear()


def builtin_names() -> tuple[str, ...]:
    return tuple(sorted(PROFILES))


def read_builtin_files() -> dict[str, Any]:
    """Every built-in profile file as its YAML reads: what ``profile_data.py`` holds. The
    files sit in the package's ``profiles/`` (importlib.resources would find the same in a
    plain install, at the cost of ~10 ms of imports: tempfile, zipfile, random)."""
    import yaml  # PyYAML only to read the profile files themselves

    where = Path(__file__).resolve().parent
    return {f.name[:-5]: yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            for f in sorted(where.iterdir()) if f.name.endswith(".yaml")}


@cache
def profile_names() -> tuple[str, ...]:
    """The built-in profiles' names and the site's registered ones."""
    return tuple(sorted({*builtin_names(), *_SITE}))


def load_profile(name: str) -> Profile:
    """A site profile registered under ``name``, else the built-in one."""
    site = _SITE.get(name)
    return site if site is not None else load_builtin(name)


@cache
def load_builtin(name: str, _chain: tuple[str, ...] = ()) -> Profile:
    """A built-in profile; ``extends: NAME`` starts it from another built-in (a DGX
    chassis from its HGX baseboard)."""
    if name not in builtin_names():
        raise UnknownProfileError(name)
    if name in _chain:
        raise ValueError(f"profile {name}: extends itself ({' -> '.join((*_chain, name))})")

    data = cast("dict[str, Any]", plain_copy(PROFILES[name]))
    known = {f.name for f in fields(Profile)}
    base_name = data.pop("extends", None)
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"profile {name}: unknown keys {sorted(unknown)}")
    if "qualify" in data and (problem := qualify_problem(data["qualify"])):
        raise ValueError(f"profile {name}: {problem}")
    kwargs: dict[str, Any] = {k: tuple(v) if k in _TUPLE_FIELDS else v for k, v in data.items()}
    kwargs = {k: v for k, v in kwargs.items() if k != "name"}
    if base_name is None:
        return Profile(name=name, **kwargs)
    return replace(load_builtin(str(base_name), (*_chain, name)), name=name,
                   extends=str(base_name), **kwargs)


def lineage(profile: Profile) -> tuple[str, ...]:
    """The names ``profile`` extends, its own base first, down to the root: ``site`` ->
    ``dgx-h100`` -> ``hgx-h100-8gpu`` gives ``("dgx-h100", "hgx-h100-8gpu")``. Both loaders
    refuse a cycle and an unknown base; a chain that still breaks (a profile registered by
    hand) ends where it breaks."""
    chain: list[str] = []
    base = profile.extends
    while base is not None and base not in chain and base != profile.name:
        chain.append(base)
        try:
            base = load_profile(base).extends
        except UnknownProfileError:
            break
    return tuple(chain)
