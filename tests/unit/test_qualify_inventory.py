"""What the inventory makes of a node's own answers: rails from real ibstat listings (CAs in
strcmp order), each paired with its GPU by the topology, never by print order; storage and
management ports left out; perftest's CUDA support from its real --help; gpu_burn's compare
file and the paths gpu_burn would misread."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from clusterdiag.agent.qualify.command import inventory_notes
from clusterdiag.agent.qualify.inventory import (
    Inventory,
    compare_file,
    compare_problem,
    compute_ports,
    pair_rails,
    parse_ibstat,
    parse_topo,
    perftest_has_cuda,
    take,
)
from clusterdiag.agent.read.sources import CommandResult
from tests.real import FIXTURES, real_file

# DGX H100 (NVIDIA DGX H100/H200 User Guide, "Network Ports"; the simulator's layout): the
# compute ConnectX-7s mlx5_0,3,4,5,6,9,10,11 serve GPU0..7, each under the GPU's own PCIe
# switch; mlx5_1,2,7,8 are the storage and management ports on the CPU's root ports.
DGX_H100_COMPUTE = {"mlx5_0": 0, "mlx5_3": 1, "mlx5_4": 2, "mlx5_5": 3, "mlx5_6": 4,
                    "mlx5_9": 5, "mlx5_10": 6, "mlx5_11": 7}
DGX_H100_STORAGE = {"mlx5_1": 0, "mlx5_2": 0, "mlx5_7": 1, "mlx5_8": 1}  # -> socket


def dgx_h100_topo() -> str:
    """``nvidia-smi topo -m`` of that layout, in the real tool's layout (columns, legend) as
    the A100 capture in tests/fixtures/topo shows it."""
    nics = sorted({**DGX_H100_COMPUTE, **DGX_H100_STORAGE}, key=lambda n: int(n[5:]))
    labels = [f"GPU{g}" for g in range(8)] + [f"NIC{i}" for i in range(len(nics))]

    def cls(nic: str, gpu: int) -> str:
        if nic in DGX_H100_COMPUTE:
            mine = DGX_H100_COMPUTE[nic]
            return "PIX" if mine == gpu else "NODE" if mine // 4 == gpu // 4 else "SYS"
        return "NODE" if DGX_H100_STORAGE[nic] == gpu // 4 else "SYS"

    rows = ["\t" + "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity"]
    for g in range(8):
        cells = ["X" if h == g else "NV18" for h in range(8)] + [cls(n, g) for n in nics]
        rows.append(f"GPU{g}\t" + "\t".join(cells) + f"\t{0 if g < 4 else 56}-55\t{g // 4}")
    for i, nic in enumerate(nics):
        cells = [cls(nic, g) for g in range(8)] + ["X" if j == i else "SYS"
                                                    for j in range(len(nics))]
        rows.append(f"NIC{i}\t" + "\t".join(cells))
    rows += ["", "Legend:", "", "  X    = Self", "", "NIC Legend:", ""]
    rows += [f"  NIC{i}: {nic}" for i, nic in enumerate(nics)]
    return "\n".join(rows) + "\n"


def dgx_h100_ibstat() -> str:
    """Twelve CAs, every port Active InfiniBand, listed as ibstat lists them: by name in
    strcmp order (mlx5_0, mlx5_1, mlx5_10, mlx5_11, mlx5_2, ...), each block as in the real
    captures (tests/fixtures/real/ib)."""
    names = sorted({**DGX_H100_COMPUTE, **DGX_H100_STORAGE})
    assert names[:4] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"]
    return "".join(f"CA '{n}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n"
                   "\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n"
                   "\t\tLink layer: InfiniBand\n" for n in names)


def test_dgx_h100_compute_rails_meet_their_gpus_whatever_ibstat_order() -> None:
    topo = parse_topo(dgx_h100_topo())
    ports = parse_ibstat(dgx_h100_ibstat())
    assert [h for h, _ in ports][:4] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"]
    kept, notes = compute_ports(ports, topo, {})
    rails = pair_rails(kept, topo, {})
    assert {r.hca: r.gpu for r in rails} == DGX_H100_COMPUTE
    assert all("PIX" in r.why for r in rails)
    assert sorted(n.split("/")[0] for n in notes) == sorted(DGX_H100_STORAGE)
    assert all("not tested" in n for n in notes)
    # The same listing in any other order pairs the same way.
    again = pair_rails(list(reversed(kept)), topo, {})
    assert {r.hca: r.gpu for r in again} == DGX_H100_COMPUTE


def test_real_ibstat_listings_give_their_active_infiniband_ports() -> None:
    some_down = parse_ibstat(real_file("real/ib", "ib", "ibstat_gpud_some_down_0.txt")
                             .read_text())
    assert [h for h, _ in some_down] == ["mlx5_0", "mlx5_10", "mlx5_11", "mlx5_3", "mlx5_4",
                                         "mlx5_5", "mlx5_6", "mlx5_9"]
    roce = parse_ibstat(real_file("real/ib", "ib",
                                  "ibstat_gpud_h100_8x400G_plus_eth_all_active.txt").read_text())
    assert roce == []


def test_real_topology_pairs_each_nic_with_its_nearest_gpu() -> None:
    """The A100 capture: NIC0 is PXB to GPU0 and GPU1, NIC2 PXB to GPU2 and GPU3, NIC1 only
    NODE (a storage port): two compute rails on different GPUs, NIC1 left out."""
    topo = parse_topo((FIXTURES / "topo/a100_sxm4_8gpu_3nic_4numa_fastdeploy.txt").read_text())
    assert topo["mlx5_0"][0] == "PXB"
    assert topo["mlx5_1"][2] == "NODE"
    kept, notes = compute_ports([("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_2", 1)], topo, {})
    assert kept == [("mlx5_0", 1), ("mlx5_2", 1)]
    assert notes == ["mlx5_1/1: no GPU under its PCIe switch (nearest NODE): a storage or "
                     "management port, not tested"]
    assert {r.hca: r.gpu for r in pair_rails(kept, topo, {})} == {"mlx5_0": 0, "mlx5_2": 2}


def test_a_virtual_machine_with_every_nic_at_phb_keeps_them_all() -> None:
    topo = {"mlx5_0": {0: "PHB", 1: "PHB"}, "mlx5_1": {0: "PHB", 1: "PHB"}}
    kept, notes = compute_ports([("mlx5_0", 1), ("mlx5_1", 1)], topo, {})
    assert (len(kept), notes) == (2, [])
    assert sorted(r.gpu for r in pair_rails(kept, topo, {})) == [0, 1]  # one rail per GPU


def test_pins_in_the_config_win_and_host_means_host_memory() -> None:
    topo = parse_topo(dgx_h100_topo())
    rails = pair_rails([("mlx5_0", 1), ("mlx5_3", 1)], topo, {"mlx5_0": 5, "mlx5_3": "host"})
    assert [(r.hca, r.gpu, r.why) for r in rails] == [
        ("mlx5_0", 5, "qualify.rails"),
        ("mlx5_3", None, "qualify.rails pins it to host memory")]


def test_no_topology_means_host_memory_said_so() -> None:
    (rail,) = pair_rails([("mlx5_0", 1)], None, {})
    assert rail.gpu is None
    assert "unknown" in rail.why


def test_perftest_cuda_support_read_from_its_real_help() -> None:
    debian = (FIXTURES / "real/perftest/ib_write_bw-help-debian-4.5.txt").read_text()
    assert not perftest_has_cuda(debian)
    assert perftest_has_cuda(debian + "      --use_cuda=<cuda device id> Use CUDA ...\n")


@pytest.mark.parametrize("path", ["/home/my-home/gpu_burn/compare.fatbin",
                                  "/opt/tools-dir/compare.fatbin", "/srv/gpu-libs/x.fatbin",
                                  "/opt/a-tc/compare.fatbin", "compare.fatbin"])
def test_compare_paths_gpu_burn_would_misread_are_refused(path: str) -> None:
    assert compare_problem(path) is not None


def test_a_plain_compare_path_is_accepted() -> None:
    assert compare_problem("/opt/gpu_burn/compare.fatbin") is None


class Answers:
    """A node's answers to the inventory's commands, by argv."""

    def __init__(self, answers: Mapping[str, CommandResult]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        key = " ".join(argv)
        self.asked.append(key)
        return self.answers.get(key) or CommandResult(argv, 127, "", f"{argv[0]}: not found")


def _ok(argv: str, out: str) -> tuple[str, CommandResult]:
    return argv, CommandResult(argv.split(), 0, out, "")


def test_take_asks_the_node_and_says_how_the_tests_will_run() -> None:
    debian = (FIXTURES / "real/perftest/ib_write_bw-help-debian-4.5.txt").read_text()
    runner = Answers(dict([
        _ok("nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader",
            "".join(f"{g}, 00000000:{0x18 + g:02X}:00.0\n" for g in range(8))),
        _ok("ibstat", dgx_h100_ibstat()),
        _ok("nvidia-smi topo -m", dgx_h100_topo()),
        ("ib_write_bw --help", CommandResult(["ib_write_bw", "--help"], 1, debian, "")),
        _ok("which gpu_burn", "/usr/local/bin/gpu_burn\n"),
        _ok("readlink -f /usr/local/bin/gpu_burn", "/opt/gpu-burn/gpu_burn\n"),
    ]))
    inv = take("n1", runner, {}, frozenset({"nic", "gpu_compute"}), 10)
    assert inv.gpus == list(range(8))
    assert {r.hca: r.gpu for r in inv.rails} == DGX_H100_COMPUTE
    assert inv.perftest_cuda is False
    assert inv.gpu_burn_compare == "/opt/gpu-burn/compare.fatbin"
    assert inv.problems == []
    assert any("without CUDA" in n for n in inv.notes)
    assert sum("not tested" in n for n in inv.notes) == 4


def test_take_asks_only_what_the_tests_need() -> None:
    runner = Answers(dict([_ok("nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader",
                               "0, 00000000:18:00.0\n"), _ok("ibstat", "")]))
    inv = take("n1", runner, {}, frozenset({"allreduce"}), 10)
    assert inv.gpus == [0]
    assert not any("--help" in a or a.startswith("which") for a in runner.asked)


def test_gpu_burn_not_on_path_is_a_problem_naming_the_lookup() -> None:
    runner = Answers({})
    compare, why = compare_file("n1", runner, {}, 10)
    assert compare is None
    assert why is not None
    assert why.startswith("which gpu_burn")


def test_inventory_notes_are_said_once_with_their_nodes(tmp_path: Path) -> None:
    inventories = {f"gpu{i}": Inventory(notes=["mlx5_1/1: not tested"]) for i in range(1, 5)}
    inventories["gpu9"] = Inventory(notes=["RoCE ports only: not tested"])
    assert inventory_notes(inventories) == ["gpu9: RoCE ports only: not tested",
                                            "gpu[1-4]: mlx5_1/1: not tested"]
