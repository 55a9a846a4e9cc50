"""Compute-rail roles decided when judging (checks/core/rails.py): from the
facts a snapshot holds, under the profile's compute fabric, its recognition keys and the
config lists; the collector records the PCIe hops they rest on."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusterdiag.agent.collectors.ib import gpu_hops
from clusterdiag.agent.model.ib import IbDevice, IbPort
from clusterdiag.checks.core.rails import HcaCountParams, Role, decide
from clusterdiag.checks.profiles.profile import Profile, load_profile

GPU0 = ("0000:14:01.0", "0000:15:00.0", "0000:1a:00.0", "0000:1b:00.0")
NIC0 = ("0000:14:01.0", "0000:15:00.0", "0000:17:00.0", "0000:18:00.0")
STORAGE = ("0000:29:01.0", "0000:2a:00.0")
H100 = load_profile("dgx-h100")
GENERIC = load_profile("generic")


def _dev(name: str, layer: str | None = "InfiniBand", hops: dict[str, int] | None = None,
         hca_type: str = "MT4129", **kw: Any) -> IbDevice:
    return IbDevice(name=name, hca_type=hca_type, gpu_hops=hops or {},
                    ports=[IbPort(port=1, link_layer=layer, netdev=kw.pop("netdev", None))],
                    **kw)


def test_pcie_hops_are_counted_through_the_deepest_shared_bridge() -> None:
    assert gpu_hops(NIC0, [GPU0]) == {"0000:1b:00.0": 4}  # two ports of one switch
    assert gpu_hops(STORAGE, [GPU0]) == {}  # own root port: no shared bridge
    # A NIC behind a second switch level below the GPU's root port.
    assert gpu_hops(("0000:14:01.0", "0000:30:00.0", "0000:31:00.0"), [GPU0]) == {
        "0000:1b:00.0": 5}


def test_a_storage_nic_under_a_gpu_switch_is_not_compute_on_an_infiniband_fabric() -> None:
    """The OEM HGX layout: a ConnectX-6 Dx Ethernet port beside GPU0's ConnectX-7."""
    roles = decide([_dev("mlx5_0", hops={"0000:1b:00.0": 4}),
                    _dev("mlx5_1", "Ethernet", {"0000:1b:00.0": 4}, "MT4125")], H100)
    assert roles["mlx5_0"].role == "compute"
    assert roles["mlx5_1"].role == "storage"
    assert roles["mlx5_1"].reason == ("runs Ethernet (beside GPU 0000:1b:00.0), not the "
                                      "compute fabric's InfiniBand")


def test_a_roce_profile_makes_the_ethernet_ports_the_rails() -> None:
    roce = replace(H100, hca_link_layer="Ethernet")
    roles = decide([_dev("mlx5_0", "Ethernet", {"0000:1b:00.0": 4}),
                    _dev("mlx5_1", "InfiniBand")], roce)
    assert (roles["mlx5_0"].role, roles["mlx5_1"].role) == ("compute", "storage")


def test_more_fabric_nics_than_rails_keeps_the_nearest_per_gpu_and_says_so() -> None:
    two = replace(H100, compute_hcas=2)
    devs = [_dev("mlx5_0", hops={"g0": 4}), _dev("mlx5_1", hops={"g0": 6}),
            _dev("mlx5_2", hops={"g1": 4}), _dev("mlx5_3")]
    roles = decide(devs, two)
    assert [n for n, r in sorted(roles.items()) if r.role == "compute"] == ["mlx5_0", "mlx5_2"]
    assert roles["mlx5_0"].reason == "InfiniBand, the nearest to GPU g0 (4 PCIe hops)"
    assert "not the nearest to any GPU" in roles["mlx5_1"].reason


def test_recognition_keys_decide_alone_when_the_profile_has_them() -> None:
    keyed = replace(H100, compute_netdevs=("ibp*",))
    roles = decide([_dev("mlx5_0", netdev="ibp24s0"), _dev("mlx5_1", netdev="enp42s0f0np0"),
                    _dev("mlx5_2", netdev="ibp64s0", hops={"g0": 4})], keyed)
    assert roles["mlx5_0"].role == "compute"
    assert roles["mlx5_0"].reason == "matches the profile's compute_netdevs ibp*"
    assert roles["mlx5_1"].role == "storage"
    models = replace(H100, compute_models=("MT4129",), compute_pci=("0000:aa:*",))
    roles = decide([_dev("mlx5_0", hca_type="MT4125", pci_bdf="0000:aa:00.0"),
                    _dev("mlx5_1", hca_type="MT4129"), _dev("mlx5_2", hca_type="MT4125")],
                   models)
    assert [r.role for _, r in sorted(roles.items())] == ["compute", "compute", "storage"]


def test_config_lists_win_by_name_or_guid() -> None:
    devs = [_dev("mlx5_0", node_guid="a088:c200:0011:2233"), _dev("mlx5_1")]
    roles = decide(devs, H100, HcaCountParams(compute_hcas=("0xA088C20000112233",),
                                              management_hcas=("mlx5_0",)))
    assert roles["mlx5_0"].role == "management"
    assert roles["mlx5_1"].reason == "not named in config (compute_hcas)"


def test_dpus_are_storage_and_unreadable_link_layers_unknown() -> None:
    roles = decide([_dev("mlx5_bond_0", "Ethernet", hca_type="MT41692"),
                    _dev("mlx5_9", None)], H100)
    assert roles["mlx5_bond_0"] == Role(
        "storage", "BlueField DPU (MT41692)")
    assert roles["mlx5_9"].role == "unknown"


def test_without_a_profile_fabric_affinity_then_infiniband_decides() -> None:
    profile: Profile = GENERIC
    near = decide([_dev("mlx5_0", "Ethernet", {"g0": 4}), _dev("mlx5_1")], profile)
    assert (near["mlx5_0"].role, near["mlx5_1"].role) == ("compute", "storage")
    tray = decide([_dev("mlx5_0"), _dev("mlx5_2", "Ethernet")], profile)
    assert (tray["mlx5_0"].role, tray["mlx5_2"].role) == ("compute", "storage")


def test_a_baseboard_profile_reads_the_rails_link_layer_off_the_board() -> None:
    """An OEM HGX judged as its baseboard (no NIC fields): eight InfiniBand rails beside
    the GPUs make an Ethernet storage port under GPU0's switch storage, with the reason."""
    devs = [_dev(f"mlx5_{i}", hops={f"g{i}": 4}) for i in range(8)]
    devs.append(_dev("mlx5_12", "Ethernet", {"g0": 4}, "MT4125"))
    roles = decide(devs, load_profile("hgx-h100-8gpu"))
    assert sum(r.role == "compute" for r in roles.values()) == 8
    assert roles["mlx5_12"] == Role(
        "storage", "runs Ethernet beside GPU g0; the rails beside the GPUs run InfiniBand")
