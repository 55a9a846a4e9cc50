"""Property-based tests for the collectors' parsers: InfiniBand ports and devices, PCI
functions, the host's /proc and /etc files, and what NVML answers for one GPU.

The property: whatever a file holds (empty, huge, negative, binary, no trailing newline)
or NVML returns, every value is either read or null with a reason in ``unknown`` /
``errors``, the collector never raises, and its neighbours (other files, other GPUs)
keep their values.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdiag.agent.collectors import host, nvml, pci
from clusterdiag.agent.collectors.ib import read_device
from clusterdiag.agent.collectors.ib_port import parse_rate, parse_state, read_port
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.ib import ROLES, IbDevice, IbPort
from clusterdiag.agent.model.serde import to_jsonable
from clusterdiag.agent.read.sources import CommandResult, SourceEnv
from clusterdiag.agent.read.sysfs import FileCounter
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.writers.nvml import build_module
from clusterdiag.checks.core.rails import HcaCountParams, decide
from clusterdiag.checks.profiles.profile import load_profile

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# What a sysfs attribute holds when something is wrong, and the forms it holds when not.
sysfs_bytes = st.one_of(
    st.binary(max_size=40),
    st.integers(-(1 << 70), 1 << 70).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b"\n", b"4: ACTIVE\n", b"4: ACTIVE", b"5: LinkUp\n", b"7: Phy Test\n",
                     b"400 Gb/sec (4X NDR)\n", b"2.5 Gb/sec (1X SDR)", b"0 GB/sec\n",
                     b"1e3 Gb/sec\n", b"NaN Gb/sec\n", b"InfiniBand\n", b"Ethernet",
                     b"N/A (no PMA)\n", b"18446744073709551615\n", b"4294967295\n", b"-1\n",
                     b"0x1f\n", b"\xff\xfe\x00", b"fe80:0000:0000:0000:0000:0000:0000:0001\n",
                     b"fe80::1\n", b"1" * 5000]),
)


@SETTINGS
@given(text=st.one_of(st.text(max_size=60), sysfs_bytes.map(
    lambda b: b.decode("utf-8", errors="replace"))))
def test_rate_and_state_parsers_never_raise(text: str) -> None:
    rate = parse_rate(text)
    if rate is not None:
        gbps, width, _ = rate
        assert gbps >= 0
        assert width is None or width.endswith(("X", "x"))
    name = parse_state(text)
    assert name is None or (name and name == name.strip())


@pytest.mark.parametrize(("text", "expected"), [
    ("400 Gb/sec (4X NDR)", (400.0, "4X", "NDR")),
    ("2.5 Gb/sec (1X SDR)", (2.5, "1X", "SDR")),
    ("0 GB/sec", (0.0, None, None)),
    ("100 Gb/sec (2X HDR)\n", (100.0, "2X", "HDR")),
])
def test_rate_forms_the_kernel_writes(text: str, expected: tuple[Any, ...]) -> None:
    assert parse_rate(text) == expected


PORT_VALUES = {"state": "state", "phys_state": "phys_state", "rate": "rate_gbps",
               "link_layer": "link_layer", "lid": "lid", "sm_lid": "sm_lid", "sm_sl": "sm_sl",
               "cap_mask": "cap_mask"}
COUNTERS = ("symbol_error", "port_rcv_errors", "port_xmit_data", "link_downed")


@SETTINGS
@given(files=st.fixed_dictionaries({name: sysfs_bytes for name in PORT_VALUES}),
       counters=st.fixed_dictionaries({name: sysfs_bytes for name in COUNTERS}),
       gid=sysfs_bytes)
def test_port_values_are_read_or_unknown_with_reason(tmp_path: Path, files: dict[str, bytes],
                                                     counters: dict[str, bytes],
                                                     gid: bytes) -> None:
    device = tmp_path / "mlx5_0"
    base = device / "ports" / "1"
    (base / "counters").mkdir(parents=True, exist_ok=True)
    (base / "gids").mkdir(exist_ok=True)
    for name, data in files.items():
        (base / name).write_bytes(data)
    for name, data in counters.items():
        (base / "counters" / name).write_bytes(data)
    (base / "gids" / "0").write_bytes(gid)
    port = read_port(tmp_path, device, 1, True, FileCounter())
    for name, attr in PORT_VALUES.items():
        assert (getattr(port, attr) is None) == (name in port.unknown), name
        if name in port.unknown:
            assert port.unknown[name]
    for name in COUNTERS:
        value = port.counters[name]
        assert (value is None) == (f"counters/{name}" in port.unknown)
        assert value is None or value >= 0
    assert (port.gid_prefix is None) == ("gid_prefix" in port.unknown)
    json.dumps(to_jsonable(port))


@SETTINGS
@given(files=st.fixed_dictionaries({name: sysfs_bytes for name in
                                    ("fw_ver", "node_guid", "hca_type", "board_id")}))
def test_device_identity_never_raises(tmp_path: Path, files: dict[str, bytes]) -> None:
    base = tmp_path / "mlx5_0"
    base.mkdir(exist_ok=True)
    for name, data in files.items():
        (base / name).write_bytes(data)
    dev, path = read_device(base, FileCounter())
    assert path == ()
    assert dev.unknown["pci_bdf"]
    assert dev.fw_ver is None or dev.fw_ver == dev.fw_ver.strip()
    json.dumps(to_jsonable(dev))


names = st.sampled_from(["mlx5_0", "mlx5_1", "mlx5_2"])
bdfs = st.sampled_from(["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"])


@SETTINGS
@given(devs=st.lists(st.builds(
    IbDevice, names, node_guid=st.one_of(st.none(), st.text(max_size=20)),
    hca_type=st.one_of(st.none(), st.sampled_from(["MT4129", "MT41692", ""])),
    gpu_hops=st.dictionaries(bdfs, st.integers(2, 8), max_size=2),
    ports=st.lists(st.builds(IbPort, st.just(1), link_layer=st.sampled_from(
        ["InfiniBand", "Ethernet", None])), max_size=2)),
    max_size=4, unique_by=lambda d: d.name),
    profile=st.sampled_from(["dgx-h100", "generic", "gb200-nvl72"]),
    config=st.lists(st.text(max_size=8), max_size=2))
def test_role_decision_gives_every_device_a_role(devs: list[IbDevice], profile: str,
                                                 config: list[str]) -> None:
    roles = decide(devs, load_profile(profile), HcaCountParams(compute_hcas=tuple(config)))
    assert set(roles) == {d.name for d in devs}
    assert all(r.role in ROLES and r.reason for r in roles.values())


PCI_FILES = ("vendor", "device", "class", "numa_node", "current_link_speed",
             "current_link_width", "max_link_speed", "max_link_width", "local_cpulist",
             "aer_dev_correctable", "aer_dev_fatal")


@SETTINGS
@given(files=st.fixed_dictionaries({name: sysfs_bytes for name in PCI_FILES}),
       config=st.binary(min_size=0, max_size=0x140))
def test_pci_function_never_raises(tmp_path: Path, files: dict[str, bytes],
                                   config: bytes) -> None:
    base = tmp_path / "sys/bus/pci/devices/0000:01:00.0"
    base.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (base / name).write_bytes(data)
    (base / "config").write_bytes(config)
    dev = pci.read_device(tmp_path, "0000:01:00.0", FileCounter(), with_config=True)
    assert dev.acs_ctrl is None or 0 <= dev.acs_ctrl <= 0xFFFF
    assert (dev.acs_ctrl is not None) or "acs" in dev.unknown or len(config) > 0x100
    assert all(count >= 0 for kind in dev.aer.values() for count in kind.values())
    json.dumps(to_jsonable(dev))


HOST_FILES = ("proc/meminfo", "proc/stat", "proc/cmdline", "proc/mounts", "proc/modules",
              "proc/self/limits", "proc/sys/kernel/osrelease", "etc/os-release",
              "sys/devices/system/cpu/online", "sys/devices/system/edac/mc/mc0/ce_count",
              "proc/42/stat")
host_text = st.one_of(sysfs_bytes, st.text(max_size=200).map(str.encode), st.sampled_from([
    b"MemTotal:       2113645236 kB\n", b"MemTotal: x kB\n", b"btime 1700000000\ncpu0 1 2\n",
    b"btime -5\n", b'PRETTY_NAME="Ubuntu 22.04"\n', b"PRETTY_NAME='unbalanced\n",
    b'quiet dyndbg="x +p\n', b"0-63,128-191\n", b"3-1\n",
    b"42 (a) b) D 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n",
    b"/dev/sda1 / ext4 rw 0 0\nbroken\n", b"Max locked memory unlimited unlimited bytes\n"]))


def _no_commands(argv: list[str], timeout_s: float) -> CommandResult:
    return CommandResult(argv, None, error=f"{argv[0]}: not found")


@SETTINGS
@given(files=st.fixed_dictionaries({name: host_text for name in HOST_FILES}))
def test_host_files_never_raise(tmp_path: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    env = SourceEnv(node="n1", root=tmp_path, runner=_no_commands, environ={})
    info = host.collect(env, SourceStats(), time.monotonic() + 5)
    for attr in ("cpu_count", "memory_total_bytes", "boot_time", "memlock_limit_bytes"):
        value = getattr(info, attr)
        assert value is None or value >= -1
    assert (info.memory_total_bytes is None) == ("memory_total_bytes" in info.unknown)
    json.dumps(to_jsonable(info))


# -- NVML answering oddly for one GPU ------------------------------------------------------

odd_values = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                       st.floats(), st.text(max_size=10), st.binary(max_size=10),
                       st.lists(st.integers(), max_size=3), st.just(object()))
CALLS = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetTemperature",
         "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPciInfo", "nvmlDeviceGetArchitecture",
         "nvmlDeviceGetMigMode", "nvmlDeviceGetComputeRunningProcesses",
         "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetRowRemapperHistogram",
         "nvmlDeviceGetFieldValues", "nvmlDeviceGetCurrentClocksEventReasons")
ODD_GPU = 3


@pytest.fixture(scope="module")
def node() -> SimNode:
    return build(NodeSpec("n1", "dgx-h100"))


def _collect(module: Any) -> Any:
    env = SourceEnv(node="n1", nvml=lambda: module)
    return nvml.collect(env, SourceStats(), time.monotonic() + 10)


@pytest.fixture(scope="module")
def healthy_gpus(node: SimNode) -> list[dict[str, Any]]:
    return [to_jsonable(g) for g in _collect(build_module(node)).gpus]


@SETTINGS
@given(call=st.sampled_from(CALLS), value=odd_values)
def test_odd_nvml_answer_costs_one_gpu_at_most(node: SimNode, healthy_gpus: list[Any],
                                               call: str, value: Any) -> None:
    module = build_module(node)
    real = getattr(module, call)

    def odd(handle: Any, *args: Any) -> Any:
        return value if handle.gpu.index == ODD_GPU else real(handle, *args)

    setattr(module, call, odd)
    info = _collect(module)
    assert [g.index for g in info.gpus] == list(range(8))
    for gpu in info.gpus:
        if gpu.index != ODD_GPU:
            assert to_jsonable(gpu) == healthy_gpus[gpu.index]
    assert info.gpus[ODD_GPU].lost is None, info.gpus[ODD_GPU].errors
    json.dumps(to_jsonable(info))
