"""The IB collector on the two real trees (values upstream asserts, EXPECTED.md), on bad
files, and proof that excluded devices' counters are never opened."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import ib
from clusterdiag.agent.collectors.ib_port import parse_rate, parse_state
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.read import sysfs
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.checks.core.rails import HcaCountParams, assign
from clusterdiag.checks.profiles.profile import load_profile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ib"
H100 = FIXTURES / "gpud-h100"
PROCFS = FIXTURES / "procfs"


def _collect(root: Path, params: dict[str, dict[str, object]] | None = None
             ) -> tuple[dict[str, IbDevice], SourceStats]:
    stats = SourceStats()
    devices = ib.collect(SourceEnv(root=root, params=params or {}), stats,
                         time.monotonic() + 10)
    return {d.name: d for d in devices}, stats


@pytest.mark.parametrize(("text", "gbps", "width", "speed"), [
    ("0 GB/sec", 0.0, None, None),
    ("2.5 Gb/sec (1X SDR)", 2.5, "1X", "SDR"),
    ("500 Gb/sec (4X HDR)", 500.0, "4X", "HDR"),
    ("400 Gb/sec (4X NDR)", 400.0, "4X", "NDR"),
    ("800 Gb/sec (4X XDR)", 800.0, "4X", "XDR"),
])
def test_parse_rate_as_procfs_does(text: str, gbps: float, width: str | None,
                                   speed: str | None) -> None:
    # procfs TestParseSlowRate: bytes/s = Gb/s x 125,000,000.
    assert parse_rate(text) == (gbps, width, speed)


def test_parse_rate_and_state_reject_garbage() -> None:
    assert parse_rate("fast") is None
    assert parse_state("ACTIVE") is None
    assert parse_state("7: Phy Test") == "Phy Test"


def test_procfs_tree_values() -> None:
    devs, stats = _collect(PROCFS)
    assert sorted(devs) == ["hfi1_0", "mlx4_0", "mlx5_0"]
    hfi = devs["hfi1_0"]
    assert (hfi.board_id, hfi.fw_ver, hfi.hca_type) == (
        "HPE 100Gb 1-port OP101 QSFP28 x16 PCIe Gen3 with Intel Omni-Path Adapter", "1.27.0",
        None)
    assert "hca_type" not in hfi.unknown  # optional file, absent on hfi1
    port = hfi.ports[0]
    assert (port.link_layer, port.state, port.phys_state) == ("InfiniBand", "ACTIVE", "LinkUp")
    assert port.rate_gbps * 125_000_000 == 12_500_000_000
    assert port.counters["port_rcv_data"] == 1_380_366_808_104
    assert port.counters["port_xmit_data"] == 1_094_233_306_172
    assert port.counters["port_rcv_packets"] == 638_036_947
    assert port.counters["symbol_error"] == 0
    mlx4 = devs["mlx4_0"]
    assert (mlx4.board_id, mlx4.fw_ver, mlx4.hca_type) == ("SM_1141000001000", "2.31.5050",
                                                           "MT4099")
    p1, p2 = mlx4.ports
    assert p2.link_layer == "InfiniBand"  # "InfiniBand\n\n" in the fixture
    assert p1.rate_gbps * 125_000_000 == 5_000_000_000
    assert (p1.counters["port_rcv_data"], p2.counters["port_rcv_data"]) == (8_884_894_436,
                                                                            9_841_747_136)
    assert (p1.counters["port_xmit_wait"], p2.counters["port_xmit_wait"]) == (3599, 3846)
    mlx5 = devs["mlx5_0"]
    assert (mlx5.board_id, mlx5.fw_ver, mlx5.hca_type, mlx5.node_guid) == (
        "SM_2001000001034", "14.28.2006", "MT4118", "0a7f:bc12:45ef:d23b")
    port = mlx5.ports[0]
    assert port.phys_state == "ACTIVE"  # the fixture's own quirk, kept as read
    assert port.rate_gbps * 125_000_000 == 3_125_000_000
    assert port.counters["port_xmit_data"] == 11_523_046_035_392
    assert port.counters["unicast_xmit_packets"] == 10_907_922_116
    assert port.hw_counters == {
        "duplicate_request": 41, "implied_nak_seq_err": 0, "lifespan": 10,
        "local_ack_timeout_err": 131, "out_of_buffer": 0, "out_of_sequence": 1,
        "packet_seq_err": 1, "req_cqe_error": 3481, "req_cqe_flush_error": 80,
        "req_remote_access_errors": 0, "req_remote_invalid_request": 0, "resp_cqe_error": 8109,
        "resp_cqe_flush_error": 4708, "resp_local_length_error": 0,
        "resp_remote_access_errors": 0, "rnr_nak_retry_err": 0, "roce_adp_retrans": 99,
        "roce_adp_retrans_to": 4, "roce_slow_restart": 0, "roce_slow_restart_cnps": 131,
        "roce_slow_restart_trans": 0, "rx_atomic_requests": 0, "rx_dct_connect": 0,
        "rx_read_requests": 175_528_982, "rx_write_requests": 742_114}
    assert stats.files_read > 100


def test_h100_tree_values_and_saturation() -> None:
    devs, _ = _collect(H100)
    assert sorted(devs) == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7",
                            "mlx5_8", "mlx5_9", "mlx5_bond_0"]
    mlx5_1 = devs["mlx5_1"]
    assert (mlx5_1.board_id, mlx5_1.fw_ver, mlx5_1.hca_type) == ("MT_0000000838", "28.41.1000",
                                                                 "MT4129")
    port = mlx5_1.ports[0]
    assert (port.state, port.phys_state, port.rate_gbps) == ("ACTIVE", "LinkUp", 400.0)
    assert port.rate_gbps * 125_000_000 == 50_000_000_000
    assert (port.width, port.speed) == ("4X", "NDR")
    assert port.counters["link_downed"] == 255
    assert port.counters["excessive_buffer_overrun_errors"] == 15
    assert port.counters["port_rcv_switch_relay_errors"] == 2
    # 8-bit link_downed and 4-bit buffer overrun pinned at their maximum: saturated.
    assert set(port.saturated) == {"link_downed", "excessive_buffer_overrun_errors"}
    bond = devs["mlx5_bond_0"]
    assert (bond.hca_type, bond.fw_ver) == ("MT41692", "32.38.3056")
    assert (bond.ports[0].link_layer, bond.ports[0].rate_gbps) == ("Ethernet", 200.0)
    assert (bond.ports[0].width, bond.ports[0].speed) == ("2X", "NDR")


def _roles(devs: dict[str, IbDevice], profile: str,
           params: dict[str, list[str]] | None = None) -> None:
    """Judge-time roles (checks/core/rails.py) over the collected facts."""
    named = {key: tuple(value) for key, value in (params or {}).items()}
    assign(Snapshot(node="n1", taken_at=1.0, infiniband=list(devs.values())),
           load_profile(profile), HcaCountParams(**named))


def test_h100_roles_compute_rails_and_bond_excluded() -> None:
    devs, _ = _collect(H100)
    assert {d.role for d in devs.values()} == {"unknown"}  # facts only, as collected
    _roles(devs, "dgx-h100")
    compute = sorted(n for n, d in devs.items() if d.role == "compute")
    assert compute == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8",
                       "mlx5_9"]
    bond = devs["mlx5_bond_0"]
    assert bond.excluded
    assert bond.role == "storage"
    assert bond.ports[0].counters == {}
    assert bond.ports[0].hw_counters == {}
    assert all(not d.excluded and d.ports[0].counters for n, d in devs.items() if n in compute)


def test_excluded_counters_are_never_opened(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    shutil.copytree(H100, root)
    counters = root / "sys/class/infiniband/mlx5_bond_0/ports/1/counters"
    # Unreadable counter files (directories: root reads any file mode): no error either.
    for path in counters.iterdir():
        path.unlink()
        path.mkdir()
    opened: list[str] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        opened.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(sysfs.os, "open", spy)
    devs, _ = _collect(root)
    assert not [p for p in opened if "mlx5_bond_0/ports/1/counters" in p
                or "mlx5_bond_0/ports/1/hw_counters" in p]
    assert any("mlx5_0/ports/1/counters" in p for p in opened)
    assert not [k for k in devs["mlx5_bond_0"].ports[0].unknown if k.startswith("counters")]


def test_config_names_compute_hcas_by_name_or_guid(tmp_path: Path) -> None:
    params = {"compute_hcas": ["mlx4_0", "0x0a7fbc1245efd23b"]}
    devs, _ = _collect(PROCFS, {"ib.hca_count": dict(params)})
    _roles(devs, "generic", params)
    assert devs["mlx4_0"].role == "compute"
    assert devs["mlx5_0"].role == "compute"
    assert devs["hfi1_0"].role == "storage"
    assert devs["hfi1_0"].excluded
    assert devs["hfi1_0"].ports[0].counters == {}


def test_garbage_and_unreadable_values_cost_one_value(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(H100, root)
    port_dir = root / "sys/class/infiniband/mlx5_0/ports/1"
    (port_dir / "rate").write_text("fast\n")
    (port_dir / "counters/symbol_error").write_text("lots\n")
    (port_dir / "counters/link_downed").write_text("N/A (no PMA)\n")
    (port_dir / "counters/port_rcv_errors").write_text("-3\n")
    (port_dir / "hw_counters/out_of_buffer").unlink()
    os.mkfifo(port_dir / "hw_counters/out_of_buffer")
    (port_dir / "state").unlink()
    (port_dir / "state").mkdir()
    (root / "sys/class/infiniband/mlx5_4/fw_ver").write_bytes(b"\xff\xfe")
    devs, _ = _collect(root)
    port = devs["mlx5_0"].ports[0]
    assert port.rate_gbps is None
    assert port.unknown["rate"] == "garbage 'fast'"
    assert port.counters["symbol_error"] is None
    assert port.unknown["counters/symbol_error"] == "garbage 'lots'"
    assert port.unknown["counters/link_downed"] == "not supported (N/A (no PMA))"
    assert port.unknown["counters/port_rcv_errors"] == "garbage '-3'"
    assert port.unknown["hw_counters/out_of_buffer"] == "not a regular file"
    assert port.counters["link_downed"] is None
    assert port.hw_counters["out_of_buffer"] is None
    assert port.state is None
    assert port.unknown["state"] == "is a directory"
    assert port.phys_state == "LinkUp"
    assert port.counters["port_xmit_wait"] is not None
    assert devs["mlx5_4"].fw_ver is not None  # undecodable bytes are replaced, not fatal
    assert len(devs) == 9


def test_no_infiniband_class_is_an_empty_list(tmp_path: Path) -> None:
    devs, stats = _collect(tmp_path)
    assert devs == {}
    assert stats.files_read == 0


def test_no_device_link_no_pci_netdev_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The captured H100 tree has no ``device`` links: a port without a GID-table netdev
    has no PCI function's ``net/`` to look in either, so none is listed."""
    listed: list[str] = []
    real = sysfs.os.listdir

    def spy(path: str | int) -> list[str]:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(sysfs.os, "listdir", spy)
    devs, _ = _collect(H100)
    assert all(p.netdev is None for d in devs.values() for p in d.ports)
    assert not [p for p in listed if p.endswith("/device/net")]
    assert any(p.endswith("/ports") for p in listed)
