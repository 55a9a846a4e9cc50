"""The compute-rail decision: PCIe affinity, the SYS-tray fallback, config lists."""

from __future__ import annotations

from clusterdiag.agent.collectors.ib_role import Candidate, decide

GPU0 = ("0000:14:01.0", "0000:15:00.0", "0000:1a:00.0", "0000:1b:00.0")
NIC0 = ("0000:14:01.0", "0000:15:00.0", "0000:17:00.0", "0000:18:00.0")
STORAGE = ("0000:29:01.0", "0000:2a:00.0")


def _cand(name: str, path: tuple[str, ...], layer: str | None = "InfiniBand",
          hca_type: str = "MT4129", guid: str | None = None) -> Candidate:
    return Candidate(name, guid, hca_type, path, (layer,))


def test_affinity_decides_and_link_layer_does_not_undo_it() -> None:
    roles = decide([_cand("mlx5_0", NIC0, "Ethernet"), _cand("mlx5_1", STORAGE)], [GPU0],
                   [], [], [])
    assert roles["mlx5_0"].role == "compute"
    assert "0000:1b:00.0" in roles["mlx5_0"].reason
    assert roles["mlx5_1"].role == "storage"  # IB, but no GPU under its root port


def test_sys_tray_falls_back_to_infiniband_and_not_dpu() -> None:
    gpu = ("0008:fd:01.0", "0008:fe:00.0", "0008:00:00.0", "0008:01:00.0")
    roles = decide([_cand("mlx5_0", ("0000:02:01.0", "0000:03:00.0")),
                    _cand("mlx5_2", ("0006:02:01.0", "0006:03:00.0"), "Ethernet", "MT41692"),
                    _cand("mlx5_3", ("0016:02:01.0", "0016:03:00.0"), "InfiniBand", "MT41692")],
                   [gpu], [], [], [])
    assert roles["mlx5_0"].role == "compute"
    assert "SYS" in roles["mlx5_0"].reason
    assert roles["mlx5_2"].role == "storage"
    assert roles["mlx5_3"].role == "storage"
    assert "BlueField" in roles["mlx5_3"].reason


def test_config_lists_win_by_name_or_guid() -> None:
    cands = [_cand("mlx5_0", NIC0), _cand("mlx5_7", STORAGE, guid="a088:c200:0011:2233")]
    roles = decide(cands, [GPU0], ["0xA088C20000112233"], [], ["mlx5_0"])
    assert roles["mlx5_0"].role == "management"
    assert roles["mlx5_7"].role == "compute"
    assert "config" in roles["mlx5_7"].reason


def test_unreadable_link_layer_without_affinity_is_unknown() -> None:
    roles = decide([_cand("mlx5_0", (), None)], [], [], [], [])
    assert roles["mlx5_0"].role == "unknown"
