"""scontrol's answers, from text Slurm 22.05 really printed (the reasons themselves:
test_reason.py)."""

from __future__ import annotations

import datetime as dt
import stat
import time
from pathlib import Path

import pytest

from clusterdiag.agent.slurm.scontrol import (
    Scontrol,
    SlurmError,
    locate,
    parse_job_start,
    parse_node,
    parse_nodes,
)
from tests.processes import still_running

# `scontrol show node n1 -o` after `scontrol update nodename=n1 state=drain
# reason="op: bad fan [ticket 12]"` (slurm-wlm 22.05.8, trimmed in the middle).
DRAINED = ("NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
           "NodeAddr=127.0.0.1 NodeHostName=localhost Port=27101 Version=22.05.8 "
           "OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 "
           "State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
           "ExtSensorsTemp=n/s Reason=op: bad fan [ticket 12] [root@2026-11-30T00:57:43]\n")
IDLE = ("NodeName=n2 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1 "
        "AllocTRES= CapWatts=n/a ExtSensorsTemp=n/s\n")


def test_parse_node_keeps_an_operator_reason_with_brackets_and_spaces() -> None:
    node = parse_node("n1", DRAINED)
    assert (node.state, node.reason, node.drained) == ("IDLE+DRAIN", "op: bad fan [ticket 12]",
                                                       True)
    idle = parse_node("n2", IDLE)
    assert (idle.state, idle.reason, idle.drained) == ("IDLE", None, False)
    assert parse_node("n", "NodeName=n State=DOWN* Reason=Not responding [slurm@x]").drained
    assert not parse_node("n", "NodeName=n State=MIXED").drained


def test_parse_node_refuses_an_answer_about_another_node() -> None:
    with pytest.raises(SlurmError, match="not in the answer"):
        parse_node("n10", IDLE)


def test_parse_job_start_reads_local_time() -> None:
    start = parse_job_start("JobId=1 JobState=RUNNING StartTime=2026-11-30T00:57:44 EndTime=x")
    assert start == dt.datetime(2026, 11, 30, 0, 57, 44).timestamp()
    assert parse_job_start("JobId=1 StartTime=Unknown EndTime=Unknown") is None


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_locate_finds_scontrol_next_to_slurm_conf_without_path(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "bin").mkdir()
    program = _script(tmp_path / "bin/scontrol", "exit 0\n")
    env = {"SLURM_CONF": str(tmp_path / "etc/slurm.conf")}
    assert locate(None, env) == str(program)
    assert locate(str(program), {}) == str(program)
    assert locate("scontrol", {}) is None  # configured must be absolute


def test_scontrol_passes_the_reason_as_one_argument(tmp_path: Path) -> None:
    log = tmp_path / "argv"
    program = _script(tmp_path / "scontrol", f'for a in "$@"; do echo "[$a]" >> {log}; done\n')
    Scontrol(str(program), environ={}).drain("n1", "clusterdiag: a; $(reboot) 'b'")
    assert log.read_text().splitlines() == [
        "[update]", "[NodeName=n1]", "[State=DRAIN]", "[Reason=clusterdiag: a; $(reboot) 'b']"]


def test_scontrol_errors_are_one_line_and_bounded(tmp_path: Path) -> None:
    refuse = _script(tmp_path / "refuse", "echo 'slurm_update error: Invalid node name' >&2\n"
                                          "exit 1\n")
    with pytest.raises(SlurmError, match="exit 1: slurm_update error: Invalid node name"):
        Scontrol(str(refuse), environ={}).resume("n1")
    # A wrapper whose child keeps the output pipe: the whole session is killed in time.
    hang = _script(tmp_path / "hang", f"sleep 30 & echo $! > {tmp_path}/child\nwait\n")
    started = time.monotonic()
    # 3 s: time for a loaded machine to start the wrapper and its child before the kill
    with pytest.raises(SlurmError, match=r"no answer within 3 s"):
        Scontrol(str(hang), environ={}, timeout_s=3).show_node("n1")
    assert time.monotonic() - started < 15.0  # the child holds the pipe 30 s
    child = int((tmp_path / "child").read_text())
    assert not still_running([child]), f"pid {child} outlived its session"
    with pytest.raises(SlurmError, match="not found"):
        Scontrol("/nonexistent/scontrol", environ={}).show_node("n1")
    late = Scontrol(str(hang), environ={}, deadline=time.monotonic())
    with pytest.raises(SlurmError, match="no time left"):
        late.show_node("n1")


def test_parse_nodes_reads_every_node_with_its_reason_time() -> None:
    nodes = parse_nodes(DRAINED + IDLE)
    assert [(n.name, n.state, n.reason) for n in nodes] == [
        ("n1", "IDLE+DRAIN", "op: bad fan [ticket 12]"), ("n2", "IDLE", None)]
    assert nodes[0].reason_time == dt.datetime(2026, 11, 30, 0, 57, 43).timestamp()
    assert nodes[1].reason_time is None
    odd = parse_nodes("NodeName=n3 State=DRAIN Reason=x [root@Tue Nov 30]\n")
    assert (odd[0].reason, odd[0].reason_time) == ("x", None)  # a site's own time format
    with pytest.raises(SlurmError, match="no node"):
        parse_nodes("slurm_load_node error: Unable to contact slurm controller\n")


def test_show_nodes_asks_for_the_standard_time_format(tmp_path: Path) -> None:
    program = _script(tmp_path / "scontrol",
                      'echo "NodeName=n1 Arch=$1_$2_$3 State=$SLURM_TIME_FORMAT"\n')
    nodes = Scontrol(str(program), environ={"SLURM_TIME_FORMAT": "%s"}).show_nodes()
    assert nodes[0].state == "standard"  # whatever the site's environment says
