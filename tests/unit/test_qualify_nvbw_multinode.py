"""nvbandwidth's multinode device-to-device read in ``qualify --tests rack``: the process
lines and the rank matrix read as output.cpp and inline_common.h print them (NVIDIA/
nvbandwidth @ 66746a3bef61), the build's support read from ``--list``, one process per GPU
through the launcher, and the slow GPU or tray named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify import nvbw_multinode
from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.qualify.launch import group_argv
from clusterdiag.agent.qualify.parsers.nvbandwidth import multinode_matrix, processes
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim import nvbandwidth as sim_nvbandwidth
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import load_spec
from clusterdiag.agent.sim.tools import SimTools
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.checks.qualify.judge import StragglerRule
from clusterdiag.checks.qualify.sanity import ceiling

RACK = [{"names": "t[01-04]", "profile": "gb200-nvl72", "rack": "r1"}]
TRAYS = ["t01", "t02", "t03", "t04"]

# Rank 0's output of `mpirun -np 4 --map-by ppr:2:node nvbandwidth -t
# multinode_device_to_device_memcpy_read_ce` over two trays, written line by line from the
# format strings (no real multinode capture exists): output.cpp:31-32 and :39 (version, MPI
# library), :49-51 (CUDA and driver), :153 and :155 (one process line per rank, then a
# blank line), :177 (Running), multinode_testcases.cpp:45 (the description, printed by
# output.cpp:189), inline_common.h:64-107 (two spaces, columns setw(10), rows setw(2),
# fixed two decimals, N/A, a blank line, SUM), output.cpp:190's blank line, :44-45 (NOTE).
HAND_WRITTEN = """\
nvbandwidth Version: v0.8
Built from Git version: v0.8

MPI version: Open MPI v4.1.4, package: Open MPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022
CUDA Runtime Version: 12080
CUDA Driver Version: 12080
Driver Version: 570.172.08

Process 0 (t01): device 0: NVIDIA GB200 (00000008:01:00)
Process 1 (t01): device 1: NVIDIA GB200 (00000009:01:00)
Process 2 (t02.rack1.example): device 0: NVIDIA GB200 (00000008:01:00)
Process 3 (t02.rack1.example): device 1: NVIDIA GB200 (00000009:01:00)

Running multinode_device_to_device_memcpy_read_ce.
memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
           0         1         2         3
 0       N/A    771.20    770.95    380.10
 1    770.80       N/A    771.05    381.00
 2    770.90    771.10       N/A    380.40
 3    379.90    380.70    380.20       N/A

SUM multinode_device_to_device_memcpy_read_ce 7290.30

NOTE: The reported results may not reflect the full capabilities of the platform.
Performance can vary with software drivers, hardware clocks, and system topology.

"""


def _sim(tmp_path: Path, faults: list[dict[str, Any]] | None = None) -> SimTools:
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"nodes": RACK, "faults": faults or []}))
    return SimTools({n: build(s) for n, s in load_spec(str(spec)).nodes.items()})


def test_the_hand_written_output_names_each_rank_and_the_slow_gpu() -> None:
    run_ = ToolRun("nvbandwidth", "t01", "rack", "")
    ranks, cells = multinode_matrix(HAND_WRITTEN, nvbw_multinode.TESTCASE, run_)
    assert ranks == {0: ("t01", 0), 1: ("t01", 1), 2: ("t02.rack1.example", 0),
                     3: ("t02.rack1.example", 1)}
    assert len(cells) == 12
    assert cells[(0, 3)] == 380.10
    assert cells[(3, 0)] == 379.90
    read = nvbw_multinode.read(HAND_WRITTEN, ["t01", "t02"], "t01")
    assert [(g.host, g.gpu, g.copies) for g in read.gpus] == [
        ("t01", 0, 6), ("t01", 1, 6), ("t02", 0, 6), ("t02", 1, 6)]
    by_tray, cluster = nvbw_multinode.findings(
        read, {"t01": "gb200-nvl72", "t02": "gb200-nvl72"}, {"gb200-nvl72": None},
        StragglerRule())
    assert [(f.status, f.component) for f in by_tray["t02"]] == [(Status.FAIL, "gpu1")]
    assert [f.status for f in by_tray["t01"]] == [Status.PASS]
    assert cluster == []


def test_process_lines_pad_the_rank_to_the_widest() -> None:
    """common.h:210-216: the rank right-aligned to the digits of worldSize - 1."""
    tools = SimTools({n: build(s) for n, s in load_spec("gb200-nvl72").nodes.items()})
    node = next(iter(tools.nodes.values()))
    text = sim_nvbandwidth.process_lines([(node, g % 4) for g in range(12)])
    assert text.splitlines()[3].startswith(f"Process  3 ({node.name}): device 3: NVIDIA ")
    assert text.splitlines()[11].startswith("Process 11 ")
    found = processes(text, ToolRun("nvbandwidth", "x", "rack", ""))
    assert found[3] == (node.name, 3)
    assert len(found) == 12


def test_the_stand_in_under_mpi_reads_back_rank_by_rank(tmp_path: Path) -> None:
    tools = _sim(tmp_path)
    result = tools.group(TRAYS, nvbw_multinode.command("nvbandwidth"), {}, 600, per_node=4)
    assert result.returncode == 0, result.error
    lines = result.stdout.splitlines()
    assert lines[3].startswith("MPI version: Open MPI v")
    assert lines[8] == "Process  0 (t01): device 0: " + sim_nvbandwidth.device_display(
        tools.nodes["t01"], 0)
    assert lines[8 + 15].startswith("Process 15 (t04): device 3: ")
    run_ = ToolRun("nvbandwidth", "t01", "rack", "")
    ranks, cells = multinode_matrix(result.stdout, nvbw_multinode.TESTCASE, run_)
    assert len(ranks) == 16
    assert len(cells) == 16 * 15
    assert run_.complete
    assert {ranks[r] for r in range(4, 8)} == {("t02", g) for g in range(4)}
    assert tools.group(TRAYS, nvbw_multinode.command("nvbandwidth"), {}, 600).error


def test_the_build_says_whether_it_has_multinode_testcases(tmp_path: Path) -> None:
    tools = _sim(tmp_path)
    listed = tools("t01", nvbw_multinode.list_argv("nvbandwidth"), {}, 30)
    assert "\n35, multinode_device_to_device_memcpy_read_ce:\n\tMeasures bandwidth" in \
        listed.stdout
    assert nvbw_multinode.unsupported(listed, "t01") is None
    single = CommandResult([], 0, sim_nvbandwidth.listing(False))
    assert "34, device_local_copy:\n" in single.stdout
    assert "lists no multinode testcase" in str(nvbw_multinode.unsupported(single, "t01"))
    missing = CommandResult([], None, error="nvbandwidth: not found")
    assert "nvbandwidth: not found" in str(nvbw_multinode.unsupported(missing, "t01"))


def test_hostile_output_is_bounded_and_inert() -> None:
    run_ = ToolRun("nvbandwidth", "t01", "rack", "")
    text = ("Process 0 (<img src=x onerror=alert(1)>): device 0: x\n"
            "Process 1 (t01): device 0: x\nProcess 1 (t02): device 1: x\n"
            "Process 99999 (t02): device 0: x\n" + "Process 2 (t02): device 0: " + "A" * 10**6
            + "\nRunning multinode_device_to_device_memcpy_read_ce.\n"
            "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           0         1         2\n 1    700.00       N/A    700.00\n"
            " 2    700.00     1e308       N/A\n 7      1.00      1.00      1.00\n")
    ranks, cells = multinode_matrix(text, nvbw_multinode.TESTCASE, run_)
    assert ranks == {1: ("t01", 0), 2: ("t02", 0)}
    assert cells == {(1, 2): 700.0, (2, 1): 1e308}
    assert len(run_.notes) == 4
    assert all(len(n) < 200 for n in run_.notes)
    bound = ceiling("d2d", "GB/s", load_profile("gb200-nvl72"), None)
    read = nvbw_multinode.read(text, ["t01", "t02"], "t01", bound)
    assert not read.gpus
    assert "process 2 from process 1: 1e+308 GB/s" in read.evidence[0]


def test_launcher_runs_one_process_per_gpu() -> None:
    mpirun = group_argv("ssh", ["t01", "t02"], ["nvbandwidth"], {}, 60, per_node=4)
    assert mpirun[:8] == ["mpirun", "--host", "t01:4,t02:4", "-np", "8", "--map-by",
                          "ppr:4:node", "--bind-to"]
    srun = group_argv("srun", ["t01", "t02"], ["nvbandwidth"], {}, 60, per_node=4)
    assert srun[1:4] == ["--nodes=2", "--ntasks=8", "--ntasks-per-node=4"]
    assert group_argv("ssh", ["a", "b"], ["x"], {}, 60)[2:8] == [
        "a,b", "-np", "2", "--map-by", "ppr:1:node", "--bind-to"]


def _qualify(tmp_path: Path, faults: list[dict[str, Any]]) -> Any:
    spec = tmp_path / "q.yaml"
    spec.write_text(json.dumps({"nodes": RACK, "faults": faults}))
    return run(Request(simulate=str(spec), tests="rack"), Config())


def _bad(report: Any) -> list[tuple[str, str, str, Status]]:
    return sorted((n, f.check, f.component, f.status) for n, own in report.findings.items()
                  for f in own if f.status not in (Status.PASS, Status.SKIP))


def test_qualify_rack_names_the_slow_gpu(tmp_path: Path) -> None:
    report = _qualify(tmp_path, [{"node": "t03", "kind": "nvbw_multinode_slow_gpu",
                                  "gpu": 2}])
    assert _bad(report) == [("t03", "qualify.rack", "gpu2", Status.FAIL)]
    assert report.bad_nodes == ["t03"]


def test_qualify_rack_names_a_tray_whose_every_gpu_is_slow(tmp_path: Path) -> None:
    report = _qualify(tmp_path, [{"node": "t02", "kind": "nvbw_multinode_slow_gpu", "gpu": g}
                                 for g in range(4)])
    assert _bad(report) == [("t02", "qualify.rack", "node", Status.FAIL)]


def test_a_healthy_rack_passes_on_every_tray(tmp_path: Path) -> None:
    report = _qualify(tmp_path, [])
    said = {n: [f.status for f in own if "nvbandwidth multinode" in f.message]
            for n, own in report.findings.items()}
    assert said == {t: [Status.PASS] for t in TRAYS}
    assert not report.bad_nodes
