"""The active-test parsers on every real tool output (tests/real.py: the copied ones in
tests/fixtures/real/active/, the others where the shared real-data set is beside the
repository), on the
variants a saved log takes (launcher prefixes, N/A in #wrong, failures), and on what the
simulated tools print (the stand-ins must pass the same parsers)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify import parsers
from clusterdiag.agent.qualify.logs import judge_logs
from clusterdiag.agent.qualify.plan import Step
from clusterdiag.agent.qualify.run import run_step
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.tools import SimTools
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.checks.qualify.judge import StragglerRule
from tests.real import FIXTURES, real_file, real_names

FILES = real_names("real/active", "active")

# file prefix -> (tool, (component, value) of the judged figure or None, complete, evidence)
EXPECTED: dict[str, tuple[str | None, tuple[str, float] | None, bool, set[str]]] = {
    "01": ("nccl-tests", ("node", 231.72), True, set()),
    "02": ("nccl-tests", ("node", 182.80), True, set()),
    "03": (None, None, False, set()),
    "04": ("nccl-tests", ("node", 235.26), True, set()),  # never the 68.4 average
    "05": ("nccl-tests", ("node", 226.16), True, set()),  # blank redop column
    "06": ("gpu_burn", ("gpu1", 17093.0), True, set()),
    "07": ("perftest", ("ib0/1", 24056.72 * 1048576 * 8 / 1e9), True, set()),
    "08": ("perftest", ("ib0/1", 23240.68 * 1048576 * 8 / 1e9), True, set()),
    "09": ("nvbandwidth", ("gpu0", 369.36), True, set()),
    "10": (None, None, False, set()),  # CUDA bandwidthTest: not a tool qualify runs
    "12": ("nccl-tests", ("node", 338.82), True, set()),
    "13": ("nccl-tests", ("node", 95.10), True, {"fail", "warn"}),
    "15": ("nccl-tests", None, False, set()),
    "16": ("nccl-tests", None, False, set()),
    "17": ("perftest", ("mlx5_0/1", 0.17), False, set()),
    "18": ("nvbandwidth", ("gpu0-gpu1", 276.07), True, set()),
    "20": ("dcgmi", ("gpu0", 859.08), False, {"skip", "pass"}),
    "21": ("dcgmi", ("gpu0", 12.13), True, {"fail", "config_fail", "warn", "pass", "skip"}),
    "23": ("dcgmi", None, True, {"pass"}),
}


def _capture(prefix: str) -> str:
    """The real capture numbered ``prefix``, or a skip saying it is not here."""
    name = next((f for f in FILES if f.startswith(prefix)), f"{prefix}_*.txt")
    return real_file("real/active", "active", name).read_text()


def _parse(name: str) -> tuple[str | None, ToolRun]:
    text = _capture(name[:2])
    tool = parsers.detect(text)
    run = ToolRun(tool or "unknown", "n1", "x", name, from_log=True)
    if tool:
        parsers.parse(tool, text, run)
    return tool, run


def test_every_real_output_has_an_expectation() -> None:
    assert {f[:2] for f in FILES} <= set(EXPECTED)
    copied = {p.name[:2] for p in (FIXTURES / "real/active").glob("*.txt")}
    assert copied
    assert copied <= {f[:2] for f in FILES}


@pytest.mark.parametrize("name", FILES)
def test_real_output(name: str) -> None:
    tool, figure, complete, evidence = EXPECTED[name[:2]]
    found, run = _parse(name)
    assert found == tool
    assert run.complete is complete
    assert {e.kind for e in run.evidence} == evidence
    if figure is not None:
        component, value = figure
        assert any(f.component == component and f.value == pytest.approx(value, abs=0.01)
                   for f in run.figures), run.figures


def test_nccl_figure_is_best_busbw_at_the_largest_size() -> None:
    _, run = _parse("04")
    (figure,) = run.figures
    assert figure.value == 235.26
    assert "8589934592" in figure.detail


def test_nccl_every_layout_of_file_16_is_read() -> None:
    _, run = _parse("16")
    # v2.20 header, pre-2.13 'error' column, 1-GPU alltoall, the 2017 'bytes N type op' layout
    assert [round(f.value, 2) for f in run.figures] == [1.01, 2.22, 0.0, 0.98]


def test_nccl_failure_lines_of_file_13() -> None:
    _, run = _parse("13")
    fails = [e.text for e in run.evidence if e.kind == "fail"]
    assert any("Test NCCL failure" in t for t in fails)
    assert any("NET/IB : Got completion" in t for t in fails)


def _gcm_fixture() -> str:
    return _capture("01")


@pytest.mark.parametrize("prefix", ["0: ", "[1,0]<stdout>:", "[0] ",
                                    "2026-02-16T10:00:03.000000000Z "])
def test_nccl_launcher_prefixes_are_stripped(prefix: str) -> None:
    text = "\n".join(prefix + line for line in _gcm_fixture().splitlines())
    run = ToolRun("nccl-tests", "n1", "allreduce", "x")
    assert parsers.detect(text) == "nccl-tests"
    parsers.parse("nccl-tests", text, run)
    assert run.complete
    assert run.figures[0].value == 231.72


def test_nccl_wrong_elements_and_out_of_bounds_fail() -> None:
    text = _gcm_fixture().replace("231.72      0   8109.7", "231.72      3   8109.7")
    text = text.replace("Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED")
    run = ToolRun("nccl-tests", "n1", "allreduce", "x")
    parsers.parse("nccl-tests", text, run)
    texts = [e.text for e in run.evidence if e.kind == "fail"]
    assert any("3 wrong elements" in t for t in texts)
    assert any("FAILED" in t for t in texts)


def test_nccl_na_in_wrong_is_not_a_failure() -> None:
    text = _gcm_fixture().replace("  0\n", "N/A\n")
    run = ToolRun("nccl-tests", "n1", "allreduce", "x")
    parsers.parse("nccl-tests", text, run)
    assert not run.evidence
    assert run.figures[0].value == 231.72


def test_perftest_report_gbits_unit_is_kept() -> None:
    text = ("                    RDMA_Write BW Test\n Dual-port       : OFF\t\tDevice         : "
            "mlx5_3\n #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
            "MsgRate[Mpps]\n 8388608    2000             391.20              390.95\t\t     "
            "0.005825\n" + "-" * 87 + "\n")
    run = ToolRun("perftest", "n1", "nic", "x")
    parsers.parse("perftest", text, run)
    assert run.complete
    assert run.figures[0].component == "mlx5_3/1"
    assert run.figures[0].value == pytest.approx(390.95)


def test_logs_name_an_unrecognised_file_and_judge_the_rest(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    good = real_file("real/active", "active", next(f for f in FILES if f.startswith("01")))
    result = judge_logs([junk, good], load_profile("dgx-a100"), StragglerRule())
    assert [f.status for f in result.judgement.findings["notes.txt"]] == [Status.ERROR]
    assert "notes.txt" in result.names
    statuses = {f.status for f in result.judgement.findings[good.name]}
    assert statuses == {Status.PASS}


def _sim_output(program: str, argv: list[str], env: dict[str, str] | None = None) -> str:
    node = build(NodeSpec("s1", "dgx-h100"))
    result = SimTools({"s1": node})("s1", [program, *argv], env or {}, 10)
    assert result.returncode == 0
    return result.stdout


def test_a_simulated_perftest_pair_passes_the_real_parser() -> None:
    """perftest's server listens only once its device is open, and the client does not
    retry by itself: the pair runs as the planner runs it (run_step: server first, the
    client retried while the server lives)."""
    node = build(NodeSpec("s1", "dgx-h100"))
    half = ("-d", "mlx5_0", "-i", "1", "--use_cuda=0", "-s", "8388608", "--report_gbits",
            "-p", "18515")
    step = Step("nic", "perftest", ("ib_write_bw", *half, "localhost"), deadline_s=60,
                server_argv=("ib_write_bw", *half), tests=("nic",))
    run = run_step(step, "s1", SimTools({"s1": node}), time.monotonic() + 60)
    assert run.error is None, run.error
    assert run.complete
    assert not [e for e in run.evidence if e.kind not in ("pass", "skip")]
    assert len(run.figures) == 1


@pytest.mark.parametrize(("program", "argv", "tool", "figures"), [
    ("all_reduce_perf", ["-b", "1G", "-e", "8G", "-f", "2", "-g", "8"], "nccl-tests", 1),
    ("nvbandwidth", ["-t", "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                     "device_to_device_memcpy_read_ce", "device_local_copy"], "nvbandwidth",
     8 + 8 + 56 + 8),
    ("gpu_burn", ["-d", "-tc", "-c", "/opt/gpu-burn/compare.fatbin", "10"], "gpu_burn", 8),
    ("dcgmi", ["diag", "-r", "3", "-j"], "dcgmi", 8 * 2 + 8),
])
def test_simulated_tool_output_passes_the_real_parser(program: str, argv: list[str],
                                                      tool: str, figures: int) -> None:
    text = _sim_output(program, argv)
    assert parsers.detect(text) == tool
    run = ToolRun(tool, "s1", "allreduce" if tool == "nccl-tests" else "nic", "x")
    parsers.parse(tool, text, run)
    assert run.complete
    assert not [e for e in run.evidence if e.kind not in ("pass", "skip")]
    assert len(run.figures) == figures
