"""A GPU's identity from the driver's procfs file and its current PCIe link from sysfs:
the simulator writes the file as the driver does, the reader takes only what is in the
form NVML gives, and anything else (a missing, oversized or foreign file) gives nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from clusterdiag.agent.collectors.gpu_files import (
    INFORMATION_LIMIT,
    CurrentLink,
    DriverIdentity,
    parse_information,
    read_current_link,
    read_identity,
)
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.agent.sim.writers.nccl import gpu_information
from tests.conftest import REPO

# nv_procfs_read_gpu_info's lines in the order it prints them (NVIDIA/open-gpu-kernel-modules
# 595.45.04, kernel-open/nvidia/nv-procfs.c:124-180; the BAR lines of a DEBUG build left
# out), each seq_printf format with its C conversions as Python's % operator writes them.
DRIVER_FORMATS = (
    "Model: \t\t %s\n",
    "IRQ:   \t\t %d\n",
    "GPU UUID: \t %s\n",
    "Video BIOS: \t %s\n",
    "Bus Type: \t %s\n",
    "DMA Size: \t %d bits\n",
    "DMA Mask: \t 0x%x\n",  # %llx
    "Bus Location: \t %04x:%02x:%02x.%x\n",
    "Device Minor: \t %d\n",  # %u
    "GPU Firmware: \t %s\n",
    "GPU Excluded:\t %s\n",
)
_CONVERSIONS = {"%s": r"[^\n]*", "%d": r"-?[0-9]+", "%x": r"[0-9a-f]+", "%04x": r"[0-9a-f]{4}",
                "%02x": r"[0-9a-f]{2}"}
BDF = "0000:1b:00.0"
UUID = "GPU-3570c1b2-4811-3c94-e924-4084060dd5e5"


def driver_text(name: str = "NVIDIA H100 80GB HBM3", uuid: str = UUID,
                bus: tuple[int, int, int, int] = (0, 0x1B, 0, 0), minor: int = 3) -> str:
    """The file as the driver's formats print it for these values."""
    values: tuple[tuple[object, ...], ...] = (
        (name,), (42,), (uuid,), ("96.00.a5.00.01",), ("PCIe",), (47,), ((1 << 47) - 1,),
        bus, (minor,), ("590.48.01",), ("No",))
    return "".join(fmt % args for fmt, args in zip(DRIVER_FORMATS, values, strict=True))


def _pattern(fmt: str) -> re.Pattern[str]:
    parts = re.split(r"(%0?[0-9]*[sdx])", fmt)
    return re.compile("".join(_CONVERSIONS.get(p, re.escape(p)) for p in parts))


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
def test_the_simulator_writes_the_file_line_by_line_as_the_driver_does(profile: str) -> None:
    node = build(NodeSpec("n1", profile))
    for gpu in node.gpus:
        lines = gpu_information(gpu, node.driver_version).splitlines(keepends=True)
        assert len(lines) == len(DRIVER_FORMATS)
        for line, fmt in zip(lines, DRIVER_FORMATS, strict=True):
            assert _pattern(fmt).fullmatch(line), (fmt, line)
        assert parse_information("".join(lines), gpu.bdf) == DriverIdentity(
            gpu.name, gpu.uuid, gpu.index)


def test_the_identity_reads_from_the_drivers_format() -> None:
    assert parse_information(driver_text(), BDF) == DriverIdentity(
        "NVIDIA H100 80GB HBM3", UUID, 3)


@pytest.mark.parametrize(("text", "expected"), [
    # rm_get_device_name for a device id not in the driver's table
    (driver_text(name="Unknown"), DriverIdentity(None, UUID, 3)),
    # older drivers print a placeholder while the GPU has no UUID yet
    (driver_text(uuid="GPU-????????-????-????-????-????????????"),
     DriverIdentity("NVIDIA H100 80GB HBM3", None, 3)),
    (driver_text(uuid=UUID.upper()), DriverIdentity(
        "NVIDIA H100 80GB HBM3", None, 3)),
    (driver_text(minor=248), DriverIdentity("NVIDIA H100 80GB HBM3", UUID, None)),
    (driver_text(name="x" * 96), DriverIdentity(None, UUID, 3)),
    (driver_text(name="NVIDIA \x1b[31mH100"), DriverIdentity(None, UUID, 3)),
    # the UUID line is left out while the driver's UUID cache is not valid
    (driver_text().replace(f"GPU UUID: \t {UUID}\n", ""),
     DriverIdentity("NVIDIA H100 80GB HBM3", None, 3)),
], ids=["unknown-model", "placeholder-uuid", "upper-case-uuid", "minor-past-the-gpus",
        "long-name", "control-characters", "no-uuid-line"])
def test_a_value_not_in_nvmls_form_is_left_to_nvml(text: str, expected: DriverIdentity) -> None:
    assert parse_information(text, BDF) == expected


@pytest.mark.parametrize("text", [
    driver_text(bus=(0, 0x1C, 0, 0)),  # another GPU's file
    driver_text().replace("Bus Location", "Bus Place"),
    driver_text() + f"GPU UUID: \t {UUID.replace('3570', '9999')}\n",  # a key said twice
    "",
], ids=["another-gpu", "no-bus-location", "key-twice", "empty"])
def test_a_file_not_about_this_gpu_gives_nothing(text: str) -> None:
    assert parse_information(text, BDF) == DriverIdentity()


def _information(root: Path, data: bytes) -> Path:
    path = root / "proc/driver/nvidia/gpus" / BDF / "information"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def test_the_file_is_read_under_the_root(tmp_path: Path) -> None:
    _information(tmp_path, driver_text().encode())
    assert read_identity(tmp_path, BDF) == DriverIdentity("NVIDIA H100 80GB HBM3", UUID, 3)


def test_an_oversized_file_is_not_the_drivers(tmp_path: Path) -> None:
    padding = b"IRQ: 1\n" * (INFORMATION_LIMIT // 7 + 1)
    _information(tmp_path, driver_text().encode() + padding)
    assert read_identity(tmp_path, BDF) == DriverIdentity()


def test_a_missing_or_blocking_file_gives_nothing(tmp_path: Path) -> None:
    assert read_identity(tmp_path, BDF) == DriverIdentity()
    fifo = tmp_path / "proc/driver/nvidia/gpus" / BDF / "information"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    assert read_identity(tmp_path, BDF) == DriverIdentity()


def _link(root: Path, speed: str, width: str) -> None:
    base = root / "sys/bus/pci/devices" / BDF
    base.mkdir(parents=True)
    (base / "current_link_speed").write_text(speed)
    (base / "current_link_width").write_text(width)


@pytest.mark.parametrize(("speed", "width", "expected"), [
    ("32.0 GT/s PCIe\n", "16\n", CurrentLink(5, 16)),
    ("8 GT/s\n", "8\n", CurrentLink(3, 8)),  # the form older kernels print
    ("2.5 GT/s PCIe\n", "16\n", CurrentLink(1, 16)),  # an idle GPU
    ("Unknown\n", "0\n", CurrentLink()),  # a link that is down: NVML is asked
    ("Unknown speed\n", "63\n", CurrentLink()),  # config space reading all ones
    ("7.0 GT/s\n", "x16\n", CurrentLink()),
])
def test_the_current_link_reads_from_sysfs(tmp_path: Path, speed: str, width: str,
                                           expected: CurrentLink) -> None:
    _link(tmp_path, speed, width)
    assert read_current_link(tmp_path, BDF) == expected


def test_the_real_h200s_sysfs_link_reads_as_its_nvml_link(tmp_path: Path) -> None:
    """The one real node that has both: what its kernel printed reads as NVML answered."""
    snapshot = json.loads((REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json")
                          .read_text())
    (gpu,) = snapshot["nvml"]["gpus"]
    (dev,) = [d for d in snapshot["pci"] if d["bdf"] == gpu["pci_bdf"]]
    base = tmp_path / "sys/bus/pci/devices" / gpu["pci_bdf"]
    base.mkdir(parents=True)
    # the kernel's form (pci_speed_string): "32.0 GT/s PCIe"
    (base / "current_link_speed").write_text(f"{dev['current_link_speed_gts']:.1f} GT/s PCIe\n")
    (base / "current_link_width").write_text(f"{dev['current_link_width']}\n")
    assert read_current_link(tmp_path, gpu["pci_bdf"]) == CurrentLink(
        gpu["pcie_gen_current"], gpu["pcie_width_current"])
