"""Figures no measurement can give (checks/qualify/sanity.py): negative, NaN, infinite or above
the platform's physical limit is an ``error`` naming where it was read — ``file:line`` of a
saved log, the tool and node of a live run — never a pass, warn or fail."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from clusterdiag.agent.model.qualify import Expectation, ToolRun
from clusterdiag.agent.qualify import parsers
from clusterdiag.agent.qualify.logs import judge_logs
from clusterdiag.agent.qualify.plan import Step
from clusterdiag.agent.qualify.run import result_run, run_step
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.tools import SimTools
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.checks.qualify.judge import StragglerRule, expectations, judge
from clusterdiag.checks.qualify.sanity import MARGIN, ceiling
from tests.real import real_file, real_names

FILES = real_names("real/active", "active")
H100 = load_profile("dgx-h100")
IMPOSSIBLE = ("-1.00", "nan", "-nan", "inf", "1e+308")


def _capture(prefix: str) -> str:
    name = next(f for f in FILES if f.startswith(prefix))
    return real_file("real/active", "active", name).read_text()


def _allreduce(busbw: str) -> tuple[str, int]:
    """Capture 01 (one node, 8 A100) with its 1 GiB row's out-of-place busbw set to
    ``busbw``; and that row's line number."""
    text = _capture("01")
    old = "8109.1  132.41  231.72"
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if old in t)
    return text.replace(old, f"8109.1  132.41  {busbw:>6}"), line


def _only(findings: list[Finding], check: str) -> Finding:
    (finding,) = [f for f in findings if f.check == check]
    return finding


@pytest.mark.parametrize("busbw", IMPOSSIBLE)
def test_impossible_busbw_in_a_log_is_an_error_naming_file_and_line(
        tmp_path: Path, busbw: str) -> None:
    text, line = _allreduce(busbw)
    path = tmp_path / "node7.log"
    path.write_text(text)
    result = judge_logs([path], load_profile("dgx-a100"), StragglerRule())
    findings = result.judgement.findings["node7.log"]
    assert [f.status for f in findings] == [Status.ERROR], findings
    assert (findings[0].action, findings[0].check) == (Action.INVESTIGATE, "qualify.allreduce")
    assert f"{path}:{line}:" in str(findings[0].observed)
    assert not result.judgement.figures  # never in a median, a table or the JSON


def test_the_good_half_does_not_hide_an_impossible_one(tmp_path: Path) -> None:
    """In-place busbw 231.70 beside an out-of-place nan: the row is no measurement."""
    text, _ = _allreduce("nan")
    path = tmp_path / "n.log"
    path.write_text(text)
    findings = judge_logs([path], None, StragglerRule()).judgement.findings["n.log"]
    assert [f.status for f in findings] == [Status.ERROR]


def test_busbw_above_nvlink_is_an_error_and_below_it_is_judged(tmp_path: Path) -> None:
    """8 x H100 move at most 18 x 50 GB/s per GPU over NVLink4: 2000 GB/s busbw is not a
    measurement; 700 (above the expected 480) is one."""
    for busbw, status in (("2000.0", Status.ERROR), ("700.00", Status.PASS)):
        text, _ = _allreduce(busbw)
        path = tmp_path / "h.log"
        path.write_text(text.replace("A100-SXM4-80GB", "H100 80GB HBM3"))
        findings = judge_logs([path], H100, StragglerRule()).judgement.findings["h.log"]
        assert _only(findings, "qualify.allreduce").status is status, findings


def _sim(argv: list[str]) -> str:
    node = build(NodeSpec("s1", "dgx-h100"))
    result = SimTools({"s1": node})("s1", argv, {}, 10)
    assert result.returncode == 0
    return result.stdout


def _sim_client(half: tuple[str, ...]) -> str:
    """What the simulated perftest client prints, run against its server as the planner
    runs the pair (run_step: the client retried until the server listens)."""
    tools = SimTools({"s1": build(NodeSpec("s1", "dgx-h100"))})
    said: list[CommandResult] = []

    def runner(node: str, argv: list[str], env: Mapping[str, str],
               timeout_s: float) -> CommandResult:
        result = tools(node, argv, env, timeout_s)
        if argv[-1] == "localhost":
            said.append(result)
        return result

    step = Step("nic", "perftest", ("ib_write_bw", *half, "localhost"), deadline_s=60,
                server_argv=("ib_write_bw", *half))
    run_step(step, "s1", runner, time.monotonic() + 60)
    assert said[-1].returncode == 0, said[-1].stderr
    return said[-1].stdout


def _live(step: Step, stdout: str) -> list[Finding]:
    run = result_run(step, "gpu-node-3", CommandResult(list(step.argv), 0, stdout), 1.0)
    judgement = judge([run], {"gpu-node-3": "dgx-h100"}, {"dgx-h100": expectations(H100)},
                      StragglerRule())
    return judgement.findings["gpu-node-3"]


NVB = Step("nvbandwidth", "nvbandwidth", ("nvbandwidth", "-t", "device_local_copy"),
           tests=("hbm",))


@pytest.mark.parametrize("value", ["5000.00", "-1.00", "nan", "inf"])
def test_live_hbm_above_the_hbm_peak_is_an_error_naming_tool_and_node(value: str) -> None:
    """An H100 SXM5's HBM peak is 3.35 TB/s (read and write): its copy rate is at most
    half of that, and no unit makes 5000 GB/s possible."""
    text = _sim(["nvbandwidth", "-t", "device_local_copy"])
    cell = text.split("\n 0 ")[1].split()[2]  # gpu2's copy rate
    findings = _live(NVB, text.replace(f" {cell} ", f" {value:>9} ", 1))
    error = _only([f for f in findings if f.status is Status.ERROR], "qualify.hbm")
    said = str(error.observed)
    assert "nvbandwidth on gpu-node-3, line " in said
    assert "gpu2" in said
    assert error.component == "gpu2"
    assert not [f for f in findings if f.status in (Status.PASS, Status.FAIL, Status.WARN)
                and f.component == "gpu2"]


def test_live_nic_above_the_line_rate_is_an_error() -> None:
    step = Step("nic", "perftest", ("ib_write_bw", "-d", "mlx5_0", "--report_gbits"),
                component="mlx5_0/1")
    text = _sim_client(("-d", "mlx5_0", "-i", "1", "-s", "8388608", "--report_gbits",
                        "-p", "18515"))
    average = text.split("BW average[Gb/sec]")[1].split()[4]
    findings = _live(step, text.replace(average, "900.00"))
    assert [f.status for f in findings] == [Status.ERROR]
    assert "400 Gb/s" in str(findings[0].observed)  # the line rate it names


def test_healthy_simulated_figures_are_possible() -> None:
    text = _sim(["nvbandwidth", "-t", "device_local_copy"])
    assert {f.status for f in _live(NVB, text)} == {Status.PASS}


@pytest.mark.parametrize(("profile", "test", "unit", "physical"), [
    ("dgx-h100", "allreduce", "GB/s", 18 * 50.0),  # NVLink4, both directions
    ("gb200-nvl72", "rack", "GB/s", 18 * 100.0),  # NVLink5
    ("dgx-a100", "d2d", "GB/s", 12 * 50.0),  # NVLink3
    ("dgx-h100", "hbm", "GB/s", 3350.0),
    ("dgx-h100", "h2d", "GB/s", 64.0),  # PCIe Gen5 x16 before encoding
    ("gb200-nvl72", "h2d", "GB/s", 450.0),  # NVLink-C2C one way
    ("dgx-h100", "nic", "Gb/s", 400.0),
    ("gb300-nvl72", "rails", "Gb/s", 800.0),
])
def test_ceilings_come_from_the_profile_facts(profile: str, test: str, unit: str,
                                              physical: float) -> None:
    p = load_profile(profile)
    bound = ceiling(test, unit, p, expectations(p).get(test))
    assert bound is not None
    assert bound.value == pytest.approx(physical * (1 + MARGIN))
    assert p.name in bound.source


def test_without_a_fact_the_ceiling_is_ten_times_the_expectation_or_universal() -> None:
    a100 = load_profile("dgx-a100")
    burn = ceiling("gpu_compute", "Gflop/s", a100, expectations(a100)["gpu_compute"])
    assert burn is not None
    assert burn.value == 10 * 16900
    assert "10 x" in burn.source
    assert (ceiling("allreduce", "GB/s", None, None) or burn).value == 20000.0
    bare = ceiling("x", "GB/s", None, Expectation("x", "GB/s", "s", None, None))
    assert bare is not None
    assert "no hardware fact" in bare.source


# The real captures of 8 x A100 machines with HDR NICs (their headers say so).
A100_CAPTURES = ("01", "02", "04", "05", "06", "07", "08")


def test_every_real_capture_is_possible_on_its_platform() -> None:
    """No real output trips a ceiling: the A100 captures against the DGX A100 profile's
    facts (capture 07's 24056.72 MiB/s on an HDR port is 201.8 Gb/s, above the 200 Gb/s
    line rate: the margin is for such a clock), every capture against the universal
    bounds; a GH200's C2C copy against an A100's PCIe Gen4 is impossible."""
    paths = [real_file("real/active", "active", name) for name in FILES]
    a100 = [p for p in paths if p.name[:2] in A100_CAPTURES]
    for group, profile in ((a100, load_profile("dgx-a100")), (paths, None)):
        result = judge_logs(group, profile, StragglerRule())
        impossible = [e for run in result.runs for e in run.evidence if e.kind == "impossible"]
        assert not impossible, impossible
    gh200 = [p for p in paths if p.name.startswith("09")]
    result = judge_logs(gh200, load_profile("dgx-a100"), StragglerRule())
    assert any(e.kind == "impossible" for run in result.runs for e in run.evidence)


def test_a_screened_run_is_not_flagged_twice() -> None:
    text, _ = _allreduce("nan")
    run = ToolRun("nccl-tests", "n1", "allreduce", "log", from_log=True)
    parsers.parse("nccl-tests", text, run)
    for _ in range(2):
        judge([run], {"n1": ""}, {}, StragglerRule(), repeatable=False)
    assert sum(e.kind == "impossible" for e in run.evidence) == 1
