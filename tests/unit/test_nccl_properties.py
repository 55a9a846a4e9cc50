"""Whatever a settings file, limits file or nccl-tests output holds, the NCCL parsers and
the env validation return data or findings, never an exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clusterdiag.agent.collectors.allreduce import parse_output
from clusterdiag.agent.collectors.nccl import parse_env_file
from clusterdiag.agent.collectors.nccl_host import parse_limits_conf, parse_limits_file
from clusterdiag.agent.model.nccl import AllreduceRun, HcaPort, NcclInfo
from clusterdiag.checks.core.finding import Finding
from clusterdiag.checks.nccl.settings import validate

LINES = st.lists(st.text(max_size=60), max_size=8).map("\n".join)
VALUES = st.text(alphabet="^=,:_mlx5 01239ethibo²٣-", max_size=30)


@given(LINES, st.booleans())
def test_env_files_parse_to_nccl_settings(text: str, shell: bool) -> None:
    settings = parse_env_file(text, shell)
    assert all(name.startswith("NCCL_") for name in settings)


@given(LINES)
def test_limits_parsers_never_raise(text: str) -> None:
    parse_limits_file("Max locked memory " + text)
    for entry in parse_limits_conf(text, "/etc/security/limits.conf"):
        assert entry.limit_bytes is None or entry.limit_bytes >= -1


@given(st.lists(st.text(alphabet="0123456789.-# abcN/A", max_size=80), max_size=10))
def test_allreduce_parser_never_raises(lines: list[str]) -> None:
    parse_output("\n".join(lines), AllreduceRun())


@given(st.dictionaries(st.sampled_from(["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME",
                                        "NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL",
                                        "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_TOPO_FILE"]),
                       VALUES, max_size=5))
def test_any_settings_give_findings(env: dict[str, str]) -> None:
    info = NcclInfo(ports={"mlx5_0/1": HcaPort("ACTIVE", "InfiniBand"),
                           "mlx5_10/1": HcaPort("DOWN", "Ethernet", gid="0:0")},
                    netdevs={"eno3": "up", "lo": "unknown"}, version="2.23.4")
    findings = list(validate(info, env, rdma=True, needed_gdr=("PIX", "PXB")))
    assert all(isinstance(f, Finding) for f in findings)
