"""nccl.env: the settings a job gets, judged on this node (checks/nccl/env.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.nccl import HcaPort, NcclInfo
from clusterdiag.checks.core.finding import Status
from tests.checks.harness import run_check
from tests.checks.nccl.factory import PORTS

NETDEVS = {"lo": "unknown", "eno3": "up", "ibp24s0": "up", "enp170s0f1": "down"}


def _info(**kw: object) -> NcclInfo:
    info = NcclInfo(ports=dict(PORTS), netdevs=dict(NETDEVS))
    for key, value in kw.items():
        setattr(info, key, value)
    return info


def _judge(info: NcclInfo, mode: str = "run", rdma: bool = True) -> list:
    snap = Snapshot(node="n", taken_at=0.0, nccl=info, pci=[])
    if not rdma:
        info.ports = {}
    return run_check("nccl.env", snap, profile="dgx-h100", mode=mode)


def _bad(findings: list) -> list:
    return [f for f in findings if f.status in (Status.FAIL, Status.WARN)]


def test_socket_ifname() -> None:
    def statuses(value: str) -> list[Status]:
        info = _info(environ={"NCCL_SOCKET_IFNAME": value})
        return [f.status for f in _bad(_judge(info))]

    assert statuses("eno") == []  # prefix of eno3, up
    assert statuses("=eno3") == []
    assert statuses("eth") == [Status.FAIL]
    assert statuses("enp170") == [Status.FAIL]  # exists but down
    assert statuses("^docker,lo") == []
    assert statuses("^e,i,l") == [Status.FAIL]  # excludes everything that is up


def test_gid_index_on_roce_ports() -> None:
    ports = {"mlx5_2/1": HcaPort("ACTIVE", "Ethernet", gid="0000:0000:0000:0000:0000:0000:0000"
                                                           ":0000", gid_type="RoCE v2")}
    info = _info(environ={"NCCL_IB_GID_INDEX": "3"}, ports=ports)
    (fail,) = _bad(_judge(info))
    assert fail.status is Status.FAIL
    assert "empty GID" in fail.message
    ports["mlx5_2/1"].gid = "0000:0000:0000:0000:0000:ffff:0a00:0001"
    info.version = "2.23.4"
    (warn,) = _bad(_judge(info))
    assert warn.status is Status.WARN
    assert "2.21" in warn.message
    info = _info(environ={"NCCL_IB_GID_INDEX": "x"})
    assert [f.status for f in _bad(_judge(info))] == [Status.FAIL]


def test_topo_file_must_parse() -> None:
    info = _info(environ={"NCCL_TOPO_FILE": "/etc/topo.xml"},
                 topo_files={"/etc/topo.xml": "not valid XML: mismatched tag"})
    (fail,) = _bad(_judge(info))
    assert fail.status is Status.FAIL
    info.topo_files = {"/etc/topo.xml": None}
    assert not _bad(_judge(info))


@pytest.mark.parametrize(("name", "value", "status"), [
    ("NCCL_IB_DISABLE", "1", Status.FAIL),
    ("NCCL_IB_DISABLE", "0", None),
    ("NCCL_P2P_DISABLE", "1", Status.FAIL),
    ("NCCL_SHM_DISABLE", "1", Status.WARN),
    ("NCCL_NET", "Socket", Status.FAIL),
    ("NCCL_NET_GDR_LEVEL", "LOC", Status.FAIL),
    ("NCCL_NET_GDR_LEVEL", "0", Status.FAIL),
    ("NCCL_NET_GDR_LEVEL", "PIX", Status.WARN),  # DGX H100 GPU-NIC may be PXB
    ("NCCL_NET_GDR_LEVEL", "PXB", None),
    ("NCCL_NET_GDR_LEVEL", "bogus", Status.FAIL),
    ("NCCL_IB_CUDA_SUPPORT", "0", Status.FAIL),
])
def test_crippling_settings(name: str, value: str, status: Status | None) -> None:
    bad = _bad(_judge(_info(environ={name: value})))
    assert [f.status for f in bad] == ([status] if status else [])


def test_ib_disable_only_warns_without_rdma() -> None:
    (warn,) = _bad(_judge(_info(environ={"NCCL_IB_DISABLE": "1"}), rdma=False))
    assert warn.status is Status.WARN


def test_prolog_ignores_its_own_environment_but_reads_files() -> None:
    info = _info(environ={"NCCL_IB_DISABLE": "1"},
                 files={"/etc/nccl.conf": {"NCCL_SOCKET_IFNAME": "eth"}})
    prolog = [f.message for f in _bad(_judge(info, mode="prolog"))]
    assert len(prolog) == 1
    assert "SOCKET_IFNAME" in prolog[0]
    assert len(_bad(_judge(info, mode="run"))) == 2


def test_environment_overrides_files_in_run() -> None:
    info = _info(environ={"NCCL_SOCKET_IFNAME": "eno"},
                 files={"/etc/nccl.conf": {"NCCL_SOCKET_IFNAME": "eth"}})
    (finding,) = _judge(info, mode="run")
    assert finding.status is Status.PASS
    assert finding.observed == {"NCCL_SOCKET_IFNAME": "eno (environment)"}


def test_unreadable_settings_file_warns() -> None:
    info = _info(file_errors={"/etc/site/nccl.env": "permission denied"})
    assert [f.status for f in _bad(_judge(info))] == [Status.WARN]
