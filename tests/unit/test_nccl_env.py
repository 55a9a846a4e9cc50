"""The NCCL settings as the collector reads them: env files in each format, the ports and
netdevs under a root (agent/collectors/nccl.py); nccl.env judges them in
tests/checks/nccl/test_env.py."""

from __future__ import annotations

import time
from pathlib import Path

from clusterdiag.agent.collectors import nccl as collector
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.read.sources import SourceEnv


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
