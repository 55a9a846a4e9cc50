"""nccl.env: reading NCCL settings the way NCCL and a site would, and judging them against
the node's HCAs, ports and interfaces."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import nccl as collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.nccl import HcaPort, NcclInfo
from clusterdiag.agent.sources import SourceEnv
from clusterdiag.checks.finding import Status
from clusterdiag.checks.nccl.env import env as env_check
from clusterdiag.checks.nccl.settings import check_ib_hca, gdr_level, parse_list
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import CheckContext

# The DGX H100 compute ports plus storage ports (mlx5_1, mlx5_2) and a RoCE port.
PORTS = {f"mlx5_{i}/1": HcaPort("ACTIVE", "InfiniBand") for i in (0, 1, 2, 3, 4, 5, 10, 11)}
PORTS["mlx5_6/1"] = HcaPort("DOWN", "InfiniBand")
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
    ctx = CheckContext(snapshot=snap, profile=load_profile("dgx-h100"), params={}, mode=mode)
    return list(env_check(ctx))


def _bad(findings: list) -> list:
    return [f for f in findings if f.status in (Status.FAIL, Status.WARN)]


@pytest.mark.parametrize(("value", "exclude", "exact", "tokens"), [
    ("mlx5_0,mlx5_1", False, False, ("mlx5_0", "mlx5_1")),
    ("^=mlx5_1 , mlx5_2", True, True, ("mlx5_1", "mlx5_2")),
    ("=mlx5_0:1", False, True, ("mlx5_0:1",)),
])
def test_parse_list(value: str, exclude: bool, exact: bool, tokens: tuple) -> None:
    parsed = parse_list(value)
    assert (parsed.exclude, parsed.exact, parsed.tokens) == (exclude, exact, tokens)


def test_prefix_matching_is_called_out() -> None:
    findings = list(check_ib_hca("mlx5_1", PORTS))
    (warn,) = findings
    assert warn.status is Status.WARN
    assert "prefix" in warn.message
    assert warn.observed == {"mlx5_1": ["mlx5_10", "mlx5_11"]}
    assert warn.expected == "=mlx5_1"
    assert not list(check_ib_hca("=mlx5_1", PORTS))


def test_hca_that_does_not_exist_fails_and_a_down_port_warns() -> None:
    (fail,) = list(check_ib_hca("=mlx5_0,mlx5_99", PORTS))
    assert fail.status is Status.FAIL
    assert fail.observed == "mlx5_99"
    (warn,) = list(check_ib_hca("=mlx5_0,mlx5_6", PORTS))
    assert warn.status is Status.WARN
    assert warn.observed == ["mlx5_6/1"]
    statuses = [f.status for f in check_ib_hca("=mlx5_6", PORTS)]
    assert statuses == [Status.FAIL]  # nothing ACTIVE left: NCCL falls back to sockets


def test_port_syntax_and_exclusion() -> None:
    assert not list(check_ib_hca("=mlx5_0:1,mlx5_3:1", PORTS))
    bad, nothing = list(check_ib_hca("mlx5_0:x", PORTS))
    assert bad.status is Status.FAIL
    assert "port" in bad.message
    assert nothing.status is Status.FAIL
    assert "no ACTIVE port" in nothing.message
    assert next(f.observed for f in check_ib_hca("=mlx5_0:2", PORTS)) == "mlx5_0:2"
    # excluding a name that does not exist is a likely typo; exclusion keeps the rest
    (warn,) = list(check_ib_hca("^=mlx5_7", PORTS))
    assert warn.status is Status.WARN
    assert not list(check_ib_hca("^=mlx5_1,mlx5_2", PORTS))


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


def test_gdr_level_legacy_integers() -> None:
    assert [gdr_level(v) for v in ("0", "2", "5", "phb", "x")] == ["LOC", "PXB", "SYS", "PHB",
                                                                   None]


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


# -- the collector side ------------------------------------------------------------


def test_env_file_parsing_follows_each_format() -> None:
    nccl_conf = "# site\nNCCL_IB_HCA = =mlx5_0,mlx5_3\nNCCL_DEBUG=WARN\nOTHER=1\nbroken line\n"
    assert collector.parse_env_file(nccl_conf, shell=False) == {
        "NCCL_IB_HCA": "=mlx5_0,mlx5_3", "NCCL_DEBUG": "WARN"}
    shell = "export NCCL_SOCKET_IFNAME='=eno3'  # mgmt\nNCCL_IB_TIMEOUT=\"22\"\n"
    assert collector.parse_env_file(shell, shell=True) == {
        "NCCL_SOCKET_IFNAME": "=eno3", "NCCL_IB_TIMEOUT": "22"}


def _tree(root: Path) -> None:
    def write(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    write("etc/nccl.conf", "NCCL_IB_HCA=mlx5_0\nNCCL_IB_GID_INDEX=3\nNCCL_TOPO_FILE=/etc/t.xml\n")
    write("etc/site/nccl.env", "export NCCL_SOCKET_IFNAME=eno\n")
    write("etc/t.xml", "<system version='1'><cpu numaid='0'></system>")
    base = "sys/class/infiniband/mlx5_0/ports/1/"
    write(base + "state", "4: ACTIVE")
    write(base + "link_layer", "Ethernet")
    write(base + "gids/3", "fe80:0000:0000:0000:a288:c2ff:fe00:0001")
    write(base + "gid_attrs/types/3", "RoCE v2")
    write("sys/class/net/eno3/operstate", "up")


def test_collector_reads_files_ports_and_netdevs_under_root(tmp_path: Path) -> None:
    _tree(tmp_path)
    env = SourceEnv(root=tmp_path, environ={"NCCL_DEBUG": "INFO", "HOME": "/root"},
                    params={"nccl.env": {"env_file": "/etc/site/nccl.env"}},
                    nccl_versions=lambda paths, t: {})
    info = collector.collect(env, SourceStats(), time.monotonic() + 5)
    assert info.files == {"/etc/nccl.conf": {"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_GID_INDEX": "3",
                                             "NCCL_TOPO_FILE": "/etc/t.xml"},
                          "/etc/site/nccl.env": {"NCCL_SOCKET_IFNAME": "eno"}}
    assert info.environ == {"NCCL_DEBUG": "INFO"}
    assert info.env_sources["NCCL_SOCKET_IFNAME"] == "/etc/site/nccl.env"
    port = info.ports["mlx5_0/1"]
    assert (port.state, port.link_layer, port.gid_type) == ("ACTIVE", "Ethernet", "RoCE v2")
    assert info.netdevs == {"eno3": "up"}
    assert "mismatched tag" in (info.topo_files["/etc/t.xml"] or "")


def test_missing_site_file_is_recorded_not_raised(tmp_path: Path) -> None:
    env = SourceEnv(root=tmp_path, environ={}, params={"nccl.env": {"env_file": "/nope.env"}},
                    nccl_versions=lambda paths, t: {})
    info = collector.collect(env, SourceStats(), time.monotonic() + 5)
    assert info.file_errors == {"/nope.env": "missing"}
    assert info.files == {}
