"""``qualify --from-logs``: a log judged by what it ran (the hosts and ranks of its own device
list), only regular files read and never blocking on one, and odd file names that cannot
break the report."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify import parsers
from clusterdiag.agent.qualify.logs import judge_logs
from clusterdiag.agent.qualify.parsers.nccl import one_run
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.checks.qualify.judge import StragglerRule
from clusterdiag.reports.model.cluster import fold
from tests.conftest import run_cli
from tests.real import real_file, real_names

FILES = real_names("real/active", "active")
H100 = load_profile("dgx-h100")


def _capture(prefix: str) -> str:
    name = next(f for f in FILES if f.startswith(prefix))
    return real_file("real/active", "active", name).read_text()


def _two_node(busbw: str = "182.80", inplace: str = "181.39") -> str:
    """Capture 02 (2 x 8 A100, MPI: one device list of 16 ranks over {host1} and {host2})
    as two DGX H100 nodes would print it, its 1 GiB row's busbw set to ``busbw``."""
    text = _capture("02").replace("{host1}", "dgx-h100-a").replace("{host2}", "dgx-h100-b")
    text = text.replace("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3")
    old = "11013   97.50  182.80      0    11099   96.74  181.39      0"
    assert old in text
    return text.replace(old, f"11013   97.50  {busbw:>6}      0    11099   96.74  "
                             f"{inplace:>6}      0")


def _independent(text: str) -> str:
    """What a build without MPI prints under srun on two nodes: two complete single-node
    runs, each listing its own ranks from 0 (src/common.cu:1480)."""
    one = _capture("01")
    return one.replace("{hostname}", "dgx-h100-a") + one.replace("{hostname}", "dgx-h100-b")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(text: str) -> ToolRun:
    run = ToolRun("nccl-tests", "f", "allreduce", "f.log", from_log=True)
    parsers.parse("nccl-tests", text, run)
    return run


# -- the device list: ranks and hosts of one job ----------------------------------------


@pytest.mark.parametrize(("prefix", "ranks", "hosts"), [
    ("01", 8, 1),  # one process per GPU (-g 1), v2.13 layout with Group
    ("02", 16, 2),  # MPI over two nodes
    ("04", 8, 1),  # one process, -g 8, pre-2.13 "#   Rank  0 Pid" without Group
])
def test_ranks_and_hosts_are_read_from_the_device_list(prefix: str, ranks: int,
                                                       hosts: int) -> None:
    run = _run(_capture(prefix))
    assert (run.ranks, len(run.hosts)) == (ranks, hosts)


def test_independent_single_node_runs_are_not_one_job() -> None:
    run = _run(_independent(_capture("01")))
    assert (run.ranks, run.hosts) == (8, ("dgx-h100-a",))
    assert any("2 device lists" in n for n in run.notes)
    why = one_run(run, 2, 8)
    assert why is not None
    assert "MPI=1" in why
    assert "8 rank(s)" in why


def test_interleaved_lists_of_independent_runs_are_not_one_job() -> None:
    """srun's two tasks interleave their device lists: rank numbers repeat."""
    lines = _capture("01").splitlines()
    ranks = [line for line in lines if "Rank" in line and "Pid" in line]
    mixed = [r.replace("{hostname}", h) for r in ranks for h in ("a-1", "b-1")]
    at = lines.index(ranks[0])
    text = "\n".join(lines[:at] + mixed + lines[at + len(ranks):])
    run = _run(text)
    assert (run.ranks, len(run.hosts)) == (8, 1)
    assert one_run(run, 2, 8) is not None


def test_one_run_accepts_one_job_with_every_rank() -> None:
    run = _run(_two_node())
    assert one_run(run, 2, 8) is None
    assert "16 rank(s) on 2 host(s)" in (one_run(run, 4, 8) or "")  # two nodes missing
    assert one_run(run, 2, 4) is not None  # more ranks than asked: not this test's job


def test_one_run_without_a_device_list_is_refused() -> None:
    run = ToolRun("nccl-tests", "n1", "pairs", "all_reduce_perf")
    assert "no device list" in (one_run(run, 2, 8) or "")


# -- judged by what it ran --------------------------------------------------------------


def test_degraded_two_node_log_fails_against_the_pairs_expectation(tmp_path: Path) -> None:
    """89.9 GB/s over two DGX H100 nodes: judged as qualify.pairs (expected 370 GB/s), a
    fail, not a single-node all-reduce that a saved log can only warn about."""
    path = _write(tmp_path, "pair.log", _two_node("89.90", "89.10"))
    result = judge_logs([path], H100, StragglerRule())
    (finding,) = result.judgement.findings["pair.log"]
    assert (finding.status, finding.check, finding.action) == (
        Status.FAIL, "qualify.pairs", Action.DRAIN)
    assert "2 hosts, 16 ranks: judged as qualify.pairs" in finding.message
    assert finding.observed["value"] == 89.9
    assert finding.expected["expected"] == 370
    assert "pair.log: 2 hosts, 16 ranks: judged as qualify.pairs" in result.notes
    assert [g.run.nodes for g in result.cross] == [("dgx-h100-a", "dgx-h100-b")]


def test_healthy_two_node_log_passes_against_the_pairs_expectation(tmp_path: Path) -> None:
    path = _write(tmp_path, "pair.log", _two_node("365.00", "364.10"))
    (finding,) = judge_logs([path], H100, StragglerRule()).judgement.findings["pair.log"]
    assert (finding.status, finding.check) == (Status.PASS, "qualify.pairs")


def test_single_host_log_is_judged_as_the_node_test(tmp_path: Path) -> None:
    path = _write(tmp_path, "one.log", _capture("01"))
    result = judge_logs([path], load_profile("dgx-a100"), StragglerRule())
    assert {f.check for f in result.judgement.findings["one.log"]} == {"qualify.allreduce"}
    assert "one.log: 1 host, 8 ranks: judged as qualify.allreduce" in result.notes


def test_independent_runs_are_judged_as_node_tests(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.log", _independent(_capture("01")))
    result = judge_logs([path], load_profile("dgx-a100"), StragglerRule())
    assert {f.check for f in result.judgement.findings["two.log"]} == {"qualify.allreduce"}


def _rack(trays: int) -> str:
    """A multi-node all-reduce over ``trays`` GB200 trays of 4 GPUs, in nccl-tests' layout."""
    head = _capture("02").split("# Using devices")[0]
    devices = "".join(
        f"#  Rank {4 * t + g:2d} Group  0 Pid {1000 + g:6d} on {f'tray{t + 1:02d}':>10s} "
        f"device {g:2d} [0000:{g:02x}:00] NVIDIA GB200\n"
        for t in range(trays) for g in range(4))
    table = "#" + _capture("02").split("NCCL version 2.12.12+cuda11.6\n#")[1]
    return f"{head}# Using devices\n{devices}{table}"


def test_rack_sized_log_is_judged_against_the_rack_expectation(tmp_path: Path) -> None:
    """18 GB200 trays (72 GPUs) are a whole NVL72 rack: 182.8 GB/s against the rack's
    846.8 is a fail of qualify.rack; 2 trays of the same are a pair (185 expected)."""
    gb200 = load_profile("gb200-nvl72")
    rack = _write(tmp_path, "rack.log", _rack(18))
    pair = _write(tmp_path, "pair.log", _rack(2))
    result = judge_logs([rack, pair], gb200, StragglerRule())
    (rack_finding,) = result.judgement.findings["rack.log"]
    assert (rack_finding.status, rack_finding.check) == (Status.FAIL, "qualify.rack")
    assert "18 hosts, 72 ranks" in rack_finding.message
    assert "whole rack (18 trays)" in rack_finding.message
    (pair_finding,) = result.judgement.findings["pair.log"]
    assert (pair_finding.status, pair_finding.check) == (Status.PASS, "qualify.pairs")


def test_more_hosts_than_a_pair_are_the_scaling_test(tmp_path: Path) -> None:
    path = _write(tmp_path, "four.log", _rack(4))
    (finding,) = judge_logs([path], H100, StragglerRule()).judgement.findings["four.log"]
    assert finding.check == "qualify.scaling"
    assert "against the two-node expectation" in finding.message


# -- only regular files, never blocking ---------------------------------------------------


def _refused(path: Path) -> str:
    """judge_logs on ``path`` in a thread, so a blocking open fails the test, never hangs."""
    said: list[str] = []

    def read() -> None:
        try:
            judge_logs([path], H100, StragglerRule())
        except UsageError as exc:
            said.append(str(exc))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), f"judge_logs blocked on {path}"
    assert said, f"{path} was not refused"
    return said[0]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    assert "a FIFO" in _refused(fifo)


@pytest.mark.parametrize(("where", "said"), [
    ("dir", "a directory"), ("/dev/null", "a character device"),
    ("missing.log", "no such file")])
def test_anything_but_a_regular_file_is_refused(tmp_path: Path, where: str,
                                                said: str) -> None:
    path = Path(where) if where.startswith("/") else tmp_path / where
    if where == "dir":
        path.mkdir()
    message = _refused(path)
    assert said in message
    assert str(path) in message
    assert "\n" not in message


def test_refusal_is_one_line_exit_2(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    good = _write(tmp_path, "good.log", _capture("01"))
    for bad in (fifo, tmp_path, Path("/dev/null"), tmp_path / "missing.log"):
        proc = run_cli("qualify", "--from-logs", str(good), "--from-logs", str(bad),
                       timeout=60)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert str(bad) in proc.stderr
        assert "Traceback" not in proc.stderr


# -- odd names ----------------------------------------------------------------------------


def test_fold_keeps_names_that_are_no_host_names_verbatim() -> None:
    assert fold(["n2", "n1", "run[a].log", "x,y.log"]) == "n[1-2],run[a].log,x,y.log"
    assert fold(["a[1-3]"]) == "a[1-3]"  # a file's name, not three nodes
    assert fold([]) == ""


def test_odd_file_names_do_not_break_json_or_the_exclude_file(tmp_path: Path) -> None:
    faulty = _capture("06").replace("GPU 3: OK", "GPU 3: FAULTY")
    bad = _write(tmp_path, "burn[a].log", faulty)
    out, exclude = tmp_path / "out.json", tmp_path / "exclude.txt"
    proc = run_cli("qualify", "--from-logs", str(bad), "--format", "json", "--output",
                   str(out), "--exclude-file", str(exclude), timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(out.read_text())["bad_nodes"] == "burn[a].log"
    assert exclude.read_text().strip() == "burn[a].log"
