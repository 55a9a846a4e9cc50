"""NCCL's own lines as NCCL prints them, in any log ``qualify --from-logs`` reads.

Where no real capture holds a wording, the line is written in the exact format of NCCL's
source (NVIDIA/nccl, tag and file:line beside each): the prefix "host:pid:tid [dev] " of
INFO lines and "host:pid:tid [dev] file:line NCCL WARN " of WARN lines (src/debug.cc:175-179
at v2.20.3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify import parsers
from clusterdiag.agent.qualify.logs import judge_logs
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.qualify.judge import StragglerRule
from tests.real import real_file, real_names

# v2.4.2: sockets set up for bootstrap first (src/init.cu:127-128), "NET/Socket : Using%s"
# with " [%d]%s:%s" (net_socket.cu:38-42), then "NET/IB : Using%s ; OOB %s:%s" with
# " [%d]%s:%d/%s" (net_ib.cu:162-167), then "Ring %02d : %d -> %d [send] via NET/%s/%d%s"
# (net.cu:302).
SOCKET_USING = "gpu1:4101:4101 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"
IB_USING = "gpu1:4101:4101 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"
RING_VIA_IB = "gpu1:4101:4140 [0] NCCL INFO Ring 00 : 0 -> 8 [send] via NET/IB/0/GDRDMA"
# "Using network %s" (v2.6.4 src/init.cc:120; v2.29.2 init.cc:451).
USING_IB = "gpu1:4101:4101 [0] NCCL INFO Using network IB"
USING_SOCKET = "gpu2:5202:5202 [0] NCCL INFO Using network Socket"
SOCKET_ONLY = "gpu2:5202:5202 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>"
# 2.20 to 2.28.3: "NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d
# vendor err %d (%s)%s%s%s%s" (v2.20.3 src/transport/net_ib.cc:1696).
COMPLETION_2_20 = ("gpu1:4101:4140 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got "
                   "completion from peer 10.0.0.2<49189> with status=12 opcode=0 len=0 "
                   "vendor err 129 (Send)")
# Since 2.28.7/2.29: "NET/IB: Got completion from peer %s with status=%s(%d)
# opcode=%s(%d) vendor_err=%u %s%s%s%s hca %s" (v2.29.2 src/transport/net_ib/p2p.cc:550).
COMPLETION_2_29 = ("gpu1:4101:4140 [0] transport/net_ib/p2p.cc:550 NCCL WARN NET/IB: Got "
                   "completion from peer 10.0.0.2<49189> with status=IBV_WC_RETRY_EXC_ERR(12) "
                   "opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  hca mlx5_0")
# A TRACE build's every successful completion: "%s:%d:%d [%d] %f %s:%d NCCL TRACE "
# (debug.cc:185) and "Got completion from peer %s with status=%d opcode=%d len=%u ..."
# (v2.29.2 p2p.cc, ncclIbCompletionEventProcess).
COMPLETION_TRACE = ("gpu1:4101:4140 [0] 1234.567890 ncclIbCompletionEventProcess:712 NCCL "
                    "TRACE Got completion from peer 10.0.0.2<49189> with status=0 opcode=1 "
                    "len=0 wr_id=3 r=0x7f00 type=1 events={0,0,0,0}, devIndex=0")
# CollNet asked for but not set up: WARN("CollNet is not supported or fails to initialize,
# ignoring NCCL_ALGO=COLLNET") (v2.19.4 src/graph/tuning.cc:276).
COLLNET_WARN = ("gpu1:4101:4101 [0] graph/tuning.cc:276 NCCL WARN CollNet is not supported "
                "or fails to initialize, ignoring NCCL_ALGO=COLLNET")


def _parsed(text: str) -> ToolRun:
    tool = parsers.detect(text)
    assert tool is not None, text
    run = ToolRun(tool, "n1", "collective", "f.log", from_log=True)
    parsers.parse(tool, text, run)
    return run


def _kinds(text: str) -> list[str]:
    return [e.kind for e in _parsed(text).evidence]


def _real_line(needle: str) -> str:
    """The first line of real capture 13 (nccl-tests#185 and #252) that holds ``needle``."""
    name = next((f for f in real_names("real/active", "active") if f.startswith("13")), "13")
    text = real_file("real/active", "active", name).read_text()
    return next(line for line in text.splitlines() if needle in line)


def _real_completion_line() -> str:
    """The pre-2.20 completion error of nccl-tests#252, from real capture 13."""
    return _real_line("Got completion")


# "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE"
# (v2.19.4 src/init.cc:1412), for the processes of capture 13's two hosts: kolyoz1's pids
# 27255, 27223, 27224, 27225 on GPUs 0-3 and kolyoz2's 25146, 25172, 25169, 25148.
_PROCESSES = [("kolyoz1", 27255, 0), ("kolyoz1", 27223, 1), ("kolyoz1", 27224, 2),
              ("kolyoz1", 27225, 3), ("kolyoz2", 25146, 0), ("kolyoz2", 25172, 1),
              ("kolyoz2", 25169, 2), ("kolyoz2", 25148, 3)]
_BUS = ("1b000", "43000", "52000", "61000")


def _init_complete(rank: int) -> str:
    host, pid, gpu = _PROCESSES[rank]
    return (f"{host}:{pid}:{pid} [{gpu}] NCCL INFO comm 0x55d4c8a0e{rank}70 rank {rank} "
            f"nranks 8 cudaDev {gpu} nvmlDev {gpu} busId {_BUS[gpu]} commId "
            f"0x9c2e4f1a7b3d5e60 - Init COMPLETE")


def _using_network(rank: int, network: str) -> str:
    """ "Using network %s" (v2.19.4 src/init.cc:329)."""
    host, pid, gpu = _PROCESSES[rank]
    return f"{host}:{pid}:{pid} [{gpu}] NCCL INFO Using network {network}"


def _two_host_log() -> str:
    """Capture 13's two hosts: rank 1 (kolyoz1 GPU 1) falls back to Socket, rank 4 (kolyoz2
    GPU 0) gets capture 13's real completion error, the others use IB."""
    lines = [_using_network(r, "Socket" if r == 1 else "IB") for r in range(8)]
    lines += [_init_complete(r) for r in range(8)]
    lines += [_real_completion_line(), _real_line("kolyoz2:25146:25852 [0] NCCL INFO")]
    return "\n".join(lines)


def _judged(tmp_path: Path, text: str) -> list[Finding]:
    log = tmp_path / "train.log"
    log.write_text(text + "\n")
    return judge_logs([log], None, StragglerRule()).judgement.findings["train.log"]


@pytest.mark.parametrize("ib_line", [IB_USING, USING_IB, RING_VIA_IB])
def test_socket_setup_beside_infiniband_is_no_fallback(ib_line: str) -> None:
    assert "socket" not in _kinds(f"{SOCKET_USING}\n{ib_line}")


def test_socket_fallback_is_judged_per_process() -> None:
    text = "\n".join([SOCKET_USING, IB_USING, SOCKET_ONLY, USING_SOCKET])
    evidence = _parsed(text).evidence
    assert [e.kind for e in evidence] == ["socket"]
    assert "Using network Socket" in evidence[0].text


def test_socket_setup_alone_is_a_fallback() -> None:
    assert _kinds(SOCKET_ONLY) == ["socket"]


def test_completion_error_in_every_wording_fails() -> None:
    for line in (_real_completion_line(), COMPLETION_2_20, COMPLETION_2_29):
        assert _kinds(line) == ["fail"], line


def test_a_successful_completion_is_no_failure() -> None:
    assert _kinds(f"{USING_IB}\n{COMPLETION_TRACE}") == []


@pytest.mark.parametrize("prefix", ["[2026-06-23 15:45:07] ", "0: ", "[rank3]: ", "[rank3]:",
                                    "[1,0]<stdout>:", "[2026-06-23 15:45:07] 1: "])
def test_launcher_prefixed_nccl_lines_are_an_nccl_log(prefix: str) -> None:
    text = "\n".join(prefix + line for line in (SOCKET_ONLY, COLLNET_WARN))
    assert parsers.detect(text) == "nccl"
    assert _kinds(text) == ["warn", "socket"]


def test_a_single_pasted_line_is_judged(tmp_path: Path) -> None:
    findings = _judged(tmp_path, _real_completion_line())
    assert [f.status for f in findings] == [Status.FAIL]
    assert "Got completion" in str(findings[0].observed)


def test_an_info_log_is_judged_by_its_lines_only(tmp_path: Path) -> None:
    findings = _judged(tmp_path, "\n".join([SOCKET_USING, IB_USING, RING_VIA_IB, COLLNET_WARN]))
    assert [f.status for f in findings] == [Status.WARN]
    assert "ends before its summary" not in findings[0].message
    assert "CollNet" in str(findings[0].observed)


def test_a_healthy_info_log_has_no_failure(tmp_path: Path) -> None:
    findings = _judged(tmp_path, "\n".join([SOCKET_USING, IB_USING, USING_IB, RING_VIA_IB]))
    assert not [f for f in findings if f.status in (Status.FAIL, Status.ERROR)]


def test_each_finding_names_its_own_rank_host_and_gpu(tmp_path: Path) -> None:
    findings = _judged(tmp_path, _two_host_log())
    assert {f.status for f in findings} == {Status.FAIL}, findings
    socket = next(f for f in findings if "Socket" in f.message)
    failure = next(f for f in findings if "Got completion" in str(f.observed))
    assert socket.component == "rank 1 on kolyoz1 GPU 1 (busId 43000)"
    assert failure.component == "rank 4 on kolyoz2 GPU 0 (busId 1b000)"
    for finding, own in ((socket, 1), (failure, 4)):
        text = f"{finding.component} {finding.message}"
        assert [r for r in range(8) if f"rank {r} " in text] == [own]
    assert len(findings) == 2


def test_a_process_without_a_rank_is_named_by_host_pid_and_gpu() -> None:
    warn = _real_line("dgxh100-3:225140:225355 [0] misc/ibvwrap.cc:187")
    evidence = _parsed(warn).evidence
    assert [(e.kind, e.component) for e in evidence] == [("warn", "dgxh100-3 pid 225140 GPU 0")]


def test_the_largest_communicator_gives_the_rank() -> None:
    # Since 2.29: "[Rank %d] %s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx
    # commId 0x%llx - Init START" (v2.29.2 src/init.cc:1664); a subgroup of 2 after the world
    # of 16, as a framework makes them.
    world = ("gpu2:5202:5202 [3] NCCL INFO [Rank 11] ncclCommInitRankConfig comm "
             "0x5581a2b0 rank 11 nranks 16 cudaDev 3 nvmlDev 3 busId 1b000 commId 0x1 - "
             "Init START")
    pair = world.replace("[Rank 11]", "[Rank 1]").replace("rank 11 nranks 16", "rank 1 nranks 2")
    evidence = _parsed("\n".join([pair, world, USING_SOCKET])).evidence
    assert [e.component for e in evidence] == ["rank 11 on gpu2 GPU 3 (busId 1b000)"]


def test_a_peer_that_stopped_answering_drains_nobody_in_a_log_of_several_hosts() -> None:
    """When one node dies, every surviving rank prints a retry-exceeded completion (12)
    towards it, then flushed ones (5): a training job's log would drain every healthy host
    if each line were its printer's failure. Alone on one host, 12 is that host's."""
    peer_gone = COMPLETION_2_20.replace("gpu1:4101:4140", "gpu3:7301:7340")
    flushed = COMPLETION_2_29.replace("IBV_WC_RETRY_EXC_ERR(12)", "IBV_WC_WR_FLUSH_ERR(5)")
    assert _kinds("\n".join([COMPLETION_2_20, peer_gone, flushed])) == ["warn"] * 3
    assert _kinds(flushed) == ["warn"]
    assert _kinds(COMPLETION_2_20) == ["fail"]
