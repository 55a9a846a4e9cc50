"""What files already say about a GPU that NVML would otherwise be asked: its identity
from the driver's procfs and its current PCIe link from sysfs.

The NVML worker reads these for each GPU whose PCI address NVML gave, and asks NVML only
for a value that no file gave in the form NVML gives it. Every value is validated; a
missing, unreadable, oversized or malformed file, or one that names another GPU, costs
nothing but the NVML call it would have saved. The files are read in the NVML worker,
whose deadline covers a driver that blocks in them as it covers one blocking in NVML.

``/proc/driver/nvidia/gpus/<bdf>/information`` is written by the driver's
``nv_procfs_read_gpu_info`` (NVIDIA/open-gpu-kernel-modules 595.45.04,
kernel-open/nvidia/nv-procfs.c:101-187; the directory is named ``%04x:%02x:%02x.%1x``,
:1408), one ``Key: \\t value`` line each (:124-180). Three of its values are NVML's own:

- ``Model`` is ``rm_get_device_name`` (src/nvidia/arch/nvalloc/unix/src/osapi.c:3492),
  NVIDIA's released-name table (src/nvidia/generated/g_nv_name_released.h) looked up by
  PCI device and subsystem id, "Unknown" for an id not in it. That table's name for every
  GPU in the real ``nvidia-smi -q`` captures of drivers 535 to 610 (H100 80GB HBM3, H200,
  B200, GB200, GB300, A10, L40S, GeForce) is the name NVML gave; "Unknown" (a GPU the
  table lacks, such as a TITAN V under the open modules) asks NVML.
- ``GPU UUID`` is ``rm_get_gpu_uuid`` (osapi.c:4901): the GPU's GID through
  ``transformGidToUserFriendlyString`` (src/nvidia/src/kernel/gpu/gpu_uuid.c:44,
  "GPU-%08x-%04x-%04x-%04x-%012x"), the routine ``gpuGetGidInfo`` (gpu.c:5131) answers
  NVML's UUID with. The line is absent while the driver's UUID cache is invalid
  (nv-procfs.c:127), and older drivers print ``GPU-????????-...`` then: not a UUID, NVML
  is asked.
- ``Device Minor`` is the minor of ``/dev/nvidia<minor>``, which is what
  nvmlDeviceGetMinorNumber answers ("the Nvidia device node file for each GPU will have
  the form /dev/nvidia[minor number]", NVML API reference); a GPU's minor is at most
  NV_MINOR_DEVICE_NUMBER_REGULAR_MAX, 247 (kernel-open/common/inc/nv-chardev-numbers.h:32).

``Video BIOS`` is not taken: the driver prints it ``%02x`` (lower case,
src/nvidia/arch/nvalloc/unix/src/osinit.c:601), where NVML answers ``96.00.A5.00.1A`` in
the real captures, mostly upper case but not always (``90.04.7a.40.73`` beside
``90.04.7A.40.73`` in real ``nvidia-smi -q`` captures): its form cannot be derived, so NVML
is still asked.

The current link is the PCIe Link Status register in both places: sysfs's
``current_link_speed`` and ``current_link_width`` read PCI_EXP_LNKSTA (linux
drivers/pci/pci-sysfs.c, ``current_link_speed_show``, ``current_link_width_show``: "8 GT/s"
in older kernels, "8.0 GT/s PCIe" since they print pci_speed_string's text), as
nvmlDeviceGetCurrPcieLinkGeneration and nvmlDeviceGetCurrPcieLinkWidth report "the
current PCIe link generation/width" (NVML API reference, Device Queries). On the real
H200 (tests/fixtures/real/h200-vm-580.159.04.*) NVML said Gen5 x16 and sysfs 32.0 GT/s x16.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from ..model.pci import gen_from_gts, normalize_bdf
from ..read.sysfs import read_bytes, under
from .pci import link_speed_gts

# The driver's file is eleven short lines (~400 bytes); a longer one is not its answer.
INFORMATION_LIMIT = 4096
_LINE = re.compile(r"([A-Za-z][A-Za-z ]{0,31}):[ \t]*(.*)")
_NAME = re.compile(r"[ -~]{1,95}")  # NVML_DEVICE_NAME_V2_BUFFER_SIZE is 96 with the NUL
_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MINOR = re.compile(r"[0-9]{1,3}")
MINOR_MAX = 247
UNKNOWN_MODEL = "Unknown"  # rm_get_device_name for an id not in the table
# Every width a PCIe link trains to (PCIe Base Specification, Link Status "Negotiated Link
# Width"); 0 is a link that is down, where NVML is asked.
_WIDTHS = frozenset({1, 2, 4, 8, 12, 16, 32})


class DriverIdentity(NamedTuple):
    """What the driver's information file says NVML would: None where it does not."""

    name: str | None = None
    uuid: str | None = None
    minor_number: int | None = None


class CurrentLink(NamedTuple):
    """The link's current generation and width from sysfs: None where not readable."""

    gen: int | None = None
    width: int | None = None


def parse_information(text: str, bdf: str) -> DriverIdentity:
    """The identity in an information file's ``text``, which must name the GPU at ``bdf``
    (its ``Bus Location``) and hold each key once; otherwise nothing is taken from it."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.fullmatch(line.strip())
        if match is None:
            continue
        key, value = match.group(1).strip(), match.group(2).strip()
        if key in values:
            return DriverIdentity()
        values[key] = value
    if normalize_bdf(values.get("Bus Location")) != normalize_bdf(bdf):
        return DriverIdentity()
    name = values.get("Model", "")
    uuid = values.get("GPU UUID", "")
    minor = values.get("Device Minor", "")
    return DriverIdentity(
        name=name if _NAME.fullmatch(name) and name != UNKNOWN_MODEL else None,
        uuid=uuid if _UUID.fullmatch(uuid) else None,
        minor_number=int(minor) if _MINOR.fullmatch(minor) and int(minor) <= MINOR_MAX
        else None)


def read_identity(root: Path, bdf: str) -> DriverIdentity:
    """The identity ``/proc/driver/nvidia/gpus/<bdf>/information`` under ``root`` gives."""
    path = under(root, "/proc/driver/nvidia/gpus") / bdf / "information"
    data, _ = read_bytes(path, INFORMATION_LIMIT)
    if data is None or len(data) >= INFORMATION_LIMIT:
        return DriverIdentity()
    return parse_information(data.decode("ascii", errors="replace"), bdf)


def read_current_link(root: Path, bdf: str) -> CurrentLink:
    """The current generation and width ``/sys/bus/pci/devices/<bdf>`` under ``root``
    gives; a rate no generation has, or a width no link trains to, is None."""
    base = under(root, "/sys/bus/pci/devices") / bdf
    speed, _ = read_bytes(base / "current_link_speed", 64)
    width, _ = read_bytes(base / "current_link_width", 64)
    gen = gen_from_gts(link_speed_gts(speed.decode("ascii", errors="replace"))) \
        if speed is not None else None
    lanes = width.decode("ascii", errors="replace").strip() if width is not None else ""
    return CurrentLink(gen, int(lanes) if lanes.isdecimal() and int(lanes) in _WIDTHS
                       else None)
