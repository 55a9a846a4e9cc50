"""The agent's kept fixed attributes (agent/collectors/kept.py): off unless switched on;
on, reused while the directory is the same one and younger than the keep time, and
read again for a directory found anew (hot-plug), once too old, or when incomplete. The
PCI and InfiniBand sources then read what moves (link speed and width, AER, port states)
every collection."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import ib, kept, pci
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.agent.read.sources import CommandResult, SourceEnv
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.tree import write_tree


@pytest.fixture
def keeping() -> Iterator[None]:
    kept.keep(120.0)
    yield
    kept.keep(0.0)  # never leak into the other tests of this process


class Reads:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        self.count += 1
        return self.count


def test_off_by_default_reads_every_time(tmp_path: Path) -> None:
    read = Reads()
    assert [kept.kept("x", str(tmp_path), read) for _ in range(3)] == [1, 2, 3]


@pytest.mark.usefixtures("keeping")
def test_kept_while_the_same_directory(tmp_path: Path) -> None:
    device = tmp_path / "0000:1b:00.0"
    device.mkdir()
    read = Reads()
    assert [kept.kept("x", str(device), read) for _ in range(3)] == [1, 1, 1]
    shutil.rmtree(device)  # unplugged and found again: a new directory
    (tmp_path / "placeholder").mkdir()  # so that the inode is not handed out again
    device.mkdir()
    assert kept.kept("x", str(device), read) == 2
    assert kept.kept("y", str(device), read) == 3  # another kind, its own answer


@pytest.mark.usefixtures("keeping")
def test_read_again_once_too_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(kept.time, "monotonic", lambda: now[0])
    read = Reads()
    assert kept.kept("x", str(tmp_path), read) == 1
    now[0] += 119.9
    assert kept.kept("x", str(tmp_path), read) == 1
    now[0] += 0.1
    assert kept.kept("x", str(tmp_path), read) == 2


@pytest.mark.usefixtures("keeping")
def test_incomplete_or_unlistable_answers_are_not_kept(tmp_path: Path) -> None:
    read = Reads()
    assert [kept.kept("x", str(tmp_path), read, lambda _: False) for _ in range(2)] == [1, 2]
    gone = str(tmp_path / "gone")
    assert [kept.kept("x", gone, read) for _ in range(2)] == [3, 4]


def test_switching_off_forgets(tmp_path: Path) -> None:
    read = Reads()
    kept.keep(60.0)
    try:
        assert kept.kept("x", str(tmp_path), read) == 1
        kept.keep(0.0)
        kept.keep(60.0)
        assert kept.kept("x", str(tmp_path), read) == 2
    finally:
        kept.keep(0.0)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    write_tree(build(NodeSpec("n1", "dgx-h100")), root)
    return root


@pytest.fixture
def root(tree: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(tree, copy, symlinks=True)
    return copy


def _gpu_bdf(root: Path) -> str:
    devices = root / "sys/bus/pci/devices"
    return next(d.name for d in sorted(devices.iterdir())
                if (d / "vendor").read_text().strip() == "0x10de"
                and (d / "class").read_text().startswith("0x0302"))


def _collect(root: Path) -> tuple[dict[str, PciDevice], int]:
    stats = SourceStats()
    found = pci.collect(SourceEnv(root=root), stats, time.monotonic() + 30)
    return {d.bdf: d for d in found}, stats.files_read


@pytest.mark.usefixtures("keeping")
def test_pci_reads_the_fixed_once_and_the_moving_every_time(root: Path) -> None:
    bdf = _gpu_bdf(root)
    device = root / "sys/bus/pci/devices" / bdf
    first, files_first = _collect(root)
    (device / "numa_node").write_text("7\n")  # fixed while the function exists
    (device / "current_link_speed").write_text("2.5 GT/s PCIe\n")  # moves
    again, files_again = _collect(root)
    assert files_again < files_first / 2
    assert again[bdf].numa_node == first[bdf].numa_node != 7
    assert again[bdf].current_link_speed_gts == 2.5
    assert again[bdf].aer == first[bdf].aer
    assert again[bdf].path == first[bdf].path
    kept.keep(0.0)  # what a one-shot command sees: everything read
    kept.keep(120.0)
    fresh, files_fresh = _collect(root)
    assert fresh[bdf].numa_node == 7
    assert files_fresh == files_first


def test_pci_without_keeping_reads_everything_every_time(root: Path) -> None:
    bdf = _gpu_bdf(root)
    _, files_first = _collect(root)
    (root / "sys/bus/pci/devices" / bdf / "numa_node").write_text("7\n")
    again, files_again = _collect(root)
    assert again[bdf].numa_node == 7
    assert files_again == files_first


def _ib(root: Path) -> dict[str, IbDevice]:
    env = SourceEnv(root=root, runner=lambda argv, _: CommandResult(
        argv, None, error=f"{argv[0]}: not found"))  # no dcb of this machine's
    found = ib.collect(env, SourceStats(), time.monotonic() + 30)
    return {d.name: d for d in found}


@pytest.mark.usefixtures("keeping")
def test_ib_keeps_identity_and_ecn_and_reads_links_and_ports(root: Path) -> None:
    first = _ib(root)
    name = next(n for n, d in first.items()
                if d.pci_bdf and any(p.qos and p.qos.ecn_np is not None for p in d.ports))
    port = next(p for p in first[name].ports if p.qos)
    hca = root / "sys/class/infiniband" / name
    (hca / "fw_ver").write_text("99.99.9999\n")
    (hca / "device/current_link_width").write_text("4\n")
    (hca / f"ports/{port.port}/state").write_text("1: DOWN\n")
    enable = root / "sys/class/net" / str(port.netdev) / "ecn/roce_np/enable"
    for prio in range(8):
        (enable / str(prio)).write_text("0\n")
    again = _ib(root)[name]
    assert again.fw_ver == first[name].fw_ver != "99.99.9999"
    assert again.pcie_width == 4
    port_again = next(p for p in again.ports if p.port == port.port)
    assert port_again.state == "DOWN"
    assert port_again.qos is not None
    assert port.qos is not None
    assert port_again.qos.ecn_np == port.qos.ecn_np != []
    kept.keep(0.0)
    fresh = _ib(root)[name]
    port_fresh = next(p for p in fresh.ports if p.port == port.port)
    assert fresh.fw_ver == "99.99.9999"
    assert port_fresh.qos is not None
    assert port_fresh.qos.ecn_np == []
