"""Drain reasons and scontrol's answers, from text Slurm 22.05 really printed."""

from __future__ import annotations

import datetime as dt
import stat
import time
from pathlib import Path

import pytest

from clusterdiag.agent.slurm.reason import (
    MAX_LENGTH,
    Parsed,
    clip,
    drain_reason,
    owned,
    parse,
)
from clusterdiag.agent.slurm.scontrol import (
    Scontrol,
    SlurmError,
    locate,
    parse_job_start,
    parse_node,
)
from clusterdiag.checks.core.finding import Action, Finding, Status
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


def _fail(check: str, component: str, message: str, observed: object = None) -> Finding:
    return Finding(Status.FAIL, component, message, observed, None, Action.INVESTIGATE, check)


def test_reason_names_check_component_and_observed_value() -> None:
    links = _fail("nvlink.links_up", "gpu3", "NVLinks down", "16/18")
    assert drain_reason([links]) == "clusterdiag: nvlink.links_up gpu3 16/18"


def test_reason_uses_the_message_for_structured_observations_and_counts_the_rest() -> None:
    xid = _fail("gpu.xid", "gpu1", "Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS)", {"xid": 79})
    disk = _fail("host.disk", "node", "disk nearly full", ["/tmp"])
    warn = Finding(Status.WARN, "gpu0", "warm", 80, None, Action.NONE, "gpu.temperature")
    assert drain_reason([warn, xid, disk]) == ("clusterdiag: gpu.xid gpu1 Xid 79 "
                                               "(GPU_HAS_FALLEN_OFF_THE_BUS) (+1 more)")
    assert drain_reason([warn]) is None


def test_reason_is_one_line_within_the_limit() -> None:
    long = _fail("host.mounts", "node", "missing\nmounts " + "x" * 500, ["/a"])
    reason = drain_reason([long, long])
    assert reason is not None
    assert len(reason) <= MAX_LENGTH
    assert "\n" not in reason
    assert reason.endswith("... (+1 more)")
    assert clip("a  b\tc") == "a b c"


@pytest.mark.parametrize(("reason", "ours"), [
    (None, True), ("", True), ("clusterdiag: gpu.xid gpu1 x", True),
    ("Prolog error", False), ("op: bad fan", False), ("NHC: clusterdiag: x", False),
])
def test_only_our_prefix_is_ours(reason: str | None, ours: bool) -> None:
    assert owned(reason) is ours


def test_the_epilogs_reasons_are_marked_and_read_back() -> None:
    xid = _fail("gpu.xid", "gpu1", "Xid 79", "Xid 79")
    reason = drain_reason([xid], program="epilog")
    assert reason == "clusterdiag: epilog gpu.xid gpu1 Xid 79"
    assert parse(reason) == Parsed("gpu.xid", epilog=True)
    assert drain_reason([xid], program="healthcheck") == "clusterdiag: gpu.xid gpu1 Xid 79"


@pytest.mark.parametrize(("reason", "parsed"), [
    ("clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)", Parsed("nvlink.links_up", False)),
    ("  clusterdiag:   host.disk node full", Parsed("host.disk", False)),
    ("clusterdiag: error ConfigError: bad", Parsed(None, False)),
    ("clusterdiag: epilog", Parsed(None, True)),
    ("clusterdiag:", Parsed(None, False)),
    ("op: clusterdiag: gpu.xid", None), (None, None), ("Prolog error", None),
])
def test_parse_reads_the_check_back(reason: str | None, parsed: Parsed | None) -> None:
    assert parse(reason) == parsed


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
