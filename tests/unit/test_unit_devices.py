"""The agent unit's device policy against real ``/proc/devices`` texts of drivers before
and after 550.40 (tests/fixtures/proc_devices/PROVENANCE.md), on simulated DGX H100,
DGX B200 and GB200 trays.

systemd turns each ``DeviceAllow=`` into cgroup device rules when the unit starts
(systemd.resource-control(5), "DeviceAllow="): a ``/dev/...`` path is the node's own
major:minor, a ``char-NAME`` pattern is every major whose ``/proc/devices`` group name
matches NAME (filename globbing), with all its minors; a name that matches nothing then
adds nothing. ``DevicePolicy=closed`` adds /dev/null, /dev/zero, /dev/full, /dev/random
and /dev/urandom ("DevicePolicy="). The test applies exactly those rules.

The simulator writes no device nodes (agent/sim/writers/tree.py writes /dev/kmsg as a
plain file), so each node's major comes from the group names its driver registers,
looked up in the real text.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import pytest

from clusterdiag.agent.sim.state.hardware import SimNode, build_node
from clusterdiag.checks.profiles.profile import load_profile
from tests.conftest import REPO

UNIT = REPO / "systemd" / "clusterdiag-agent.service"
PROC_DEVICES = REPO / "tests" / "fixtures" / "proc_devices"
BEFORE_550 = ("r535-h100-efa.txt",)
FROM_550 = ("r550-imex-guide.txt", "r550-gb200-dra.txt")
TRAYS = ("dgx-h100", "dgx-b200", "gb200-nvl72")

# The group names each driver registers for a node, newest first (open-gpu-kernel-modules
# at 595.45.04 unless said): /dev/nvidiaN on major 195 as "nvidia" (kernel-open/nvidia/
# nv.c:990), "nvidia-frontend" before 550.40 (nv-frontend.c:369 at 535.113.01);
# /dev/nvidiactl, minor 255 of major 195, as "nvidiactl" (nv.c:997); /dev/nvidia-caps/*
# as "nvidia-caps" (nv-caps.c:826); IMEX channels as "nvidia-caps-imex-channels"
# (nv-caps-imex.c:185); /dev/nvidia-nvswitchN as "nvidia-nvswitch" (linux_nvswitch.c:1731,
# export_nvswitch.h:35); /dev/nvidia-uvm* as "nvidia-uvm" (nvidia-uvm/uvm.c:43); the
# InfiniBand verbs and MAD nodes as "infiniband_verbs" and "infiniband_mad" (Linux
# drivers/infiniband/core/uverbs_main.c and user_mad.c, register_chrdev_region names).
GPU_GROUPS = ("nvidia", "nvidia-frontend")
CONTROL_GROUPS = ("nvidiactl", "nvidia-frontend")


@dataclass(frozen=True)
class Node:
    path: str
    groups: tuple[str, ...]  # the /proc/devices names its major may be registered as
    minor: int
    access: str  # what the agent needs: r, rw; "" for a node it never opens


def nodes_of(node: SimNode) -> list[Node]:
    """Every /dev node of the tray that matters here, with what the agent does with it.

    Opened: NVML (libnvidia-ml, the only library the agent loads to reach the GPUs)
    opens /dev/nvidiactl and each /dev/nvidiaN read-write (the nodes nvidia-modprobe(1)
    creates for "user-space NVIDIA driver components"), and the MIG capability nodes
    /dev/nvidia-caps/nvidia-cap1 and 2 (``mig/config``, ``mig/monitor``:
    kernel-open/nvidia/nv-caps.c:63) to read MIG state; the kernel-log collector opens
    /dev/kmsg read-only (agent/collectors/kernel_log.py, ``read_kmsg``); the NVML worker
    opens /dev/null (agent/read/worker.py). N is the minor NVML reports
    (nvmlDeviceGetMinorNumber; the simulator's is the index, agent/sim/writers/nvml.py).

    Never opened: the agent runs no CUDA (checks/core/index.py refuses active tests in
    the agent), so no /dev/nvidia-uvm*, IMEX channel or InfiniBand verbs/MAD node; it
    reads NVSwitches and HCAs from sysfs and the kernel log only.
    """
    found = [Node("/dev/nvidiactl", CONTROL_GROUPS, 255, "rw")]
    found += [Node(f"/dev/nvidia{g.index}", GPU_GROUPS, g.index, "rw") for g in node.nvml_gpus]
    found += [Node(f"/dev/nvidia-caps/nvidia-cap{m}", ("nvidia-caps",), m, "r") for m in (1, 2)]
    found += [Node(f"/dev/nvidia-nvswitch{i}", ("nvidia-nvswitch",), i, "")
              for i in range(len(node.nvswitch_bdfs))]
    if node.profile.nvl72 and node.imex_channel:
        found.append(Node("/dev/nvidia-caps-imex-channels/channel0",
                          ("nvidia-caps-imex-channels",), 0, ""))
    found += [Node("/dev/nvidia-uvm", ("nvidia-uvm",), 0, ""),
              Node("/dev/nvidia-uvm-tools", ("nvidia-uvm",), 1, "")]
    for i, _ in enumerate(node.hcas):
        found += [Node(f"/dev/infiniband/uverbs{i}", ("infiniband_verbs",), 192 + i, ""),
                  Node(f"/dev/infiniband/umad{i}", ("infiniband_mad",), i, "")]
    return found


# Majors of nodes that are not the driver's: /dev/kmsg is 1:11 and /dev/null 1:3 (Linux
# Documentation/admin-guide/devices.txt, "1 char Memory devices").
FIXED = (Node("/dev/kmsg", ("mem",), 11, "r"), Node("/dev/null", ("mem",), 3, "rw"))
CLOSED_PSEUDO = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def char_groups(text: str) -> list[tuple[int, str]]:
    """``(major, name)`` of the "Character devices:" part of a /proc/devices text (an
    excerpt without the heading is all character devices)."""
    groups: list[tuple[int, str]] = []
    for line in text.splitlines():
        if line.startswith("Block devices:"):
            break
        fields = line.split(None, 1)
        if len(fields) == 2 and fields[0].isdigit():
            groups.append((int(fields[0]), fields[1].strip()))
    return groups


def service_settings(text: str, key: str) -> list[str]:
    """Every value of ``key`` in the unit's [Service] section, in order."""
    values: list[str] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith(f"{key}="):
            values.append(line.split("=", 1)[1].strip())
    return values


@dataclass(frozen=True)
class Rule:
    major: int
    minor: int | None  # None: every minor
    access: str


def rules(unit: str, groups: list[tuple[int, str]], nodes: list[Node]) -> list[Rule]:
    """The cgroup rules systemd makes of the unit on a machine with ``groups`` and
    ``nodes`` (a path names its node's major:minor; an absent one adds nothing)."""
    at = {n.path: n for n in nodes}
    made: list[Rule] = []
    for value in service_settings(unit, "DeviceAllow"):
        spec, _, access = value.partition(" ")
        if spec.startswith("char-"):
            made += [Rule(major, None, access.strip()) for major, name in groups
                     if fnmatch.fnmatchcase(name, spec[len("char-"):])]
        elif spec in at and (major := major_of(at[spec], groups)) is not None:
            made.append(Rule(major, at[spec].minor, access.strip()))
    return made


def major_of(node: Node, groups: list[tuple[int, str]]) -> int | None:
    if node in FIXED:
        return 1
    for wanted in node.groups:
        for major, name in groups:
            if name == wanted:
                return major
    return None  # the driver of this text registers no such group: no such node


def allowed(node: Node, major: int, made: list[Rule], policy: str) -> str:
    """The access the rules give ``node``."""
    if policy == "closed" and node.path in CLOSED_PSEUDO:
        return "rwm"
    return "".join(sorted({c for r in made if r.major == major and r.minor in (None, node.minor)
                           for c in r.access}))


def _text(name: str) -> str:
    return (PROC_DEVICES / name).read_text()


def test_the_texts_are_read_as_the_kernel_lists_them() -> None:
    """The helpers read the real texts right, each text says where it comes from, and the
    unit names the GPU group of both driver generations."""
    before = char_groups(_text("r535-h100-efa.txt"))
    assert (195, "nvidia-frontend") in before
    assert (259, "blkext") not in before  # a block device
    assert {n for _, n in before} >= {"nvidia-caps", "nvidia-uvm", "nvidia-nvswitch"}
    assert char_groups(_text("r550-imex-guide.txt"))[:2] == [(195, "nvidia"), (195, "nvidiactl")]
    gb200 = {n: m for m, n in char_groups(_text("r550-gb200-dra.txt"))}
    assert gb200["nvidia-caps"] != gb200["nvidia-caps-imex-channels"]
    provenance = (PROC_DEVICES / "PROVENANCE.md").read_text()
    assert sorted(p.name for p in PROC_DEVICES.glob("*.txt")) == sorted(BEFORE_550 + FROM_550)
    assert all(f"`{name}`" in provenance for name in BEFORE_550 + FROM_550)
    # The unit's device lines, which the rules below are applied to: both GPU names.
    assert service_settings(UNIT.read_text(), "DevicePolicy") == ["closed"]
    specs = {v.split()[0] for v in service_settings(UNIT.read_text(), "DeviceAllow")}
    assert {"char-nvidia", "char-nvidia-frontend"} <= specs


@pytest.mark.parametrize("tray", TRAYS)
def test_the_unit_allows_what_the_agent_opens_and_nothing_else(tray: str) -> None:
    """On every text, each node the tray has there: what the agent opens is allowed with
    the access it needs, what it never opens is denied."""
    unit = UNIT.read_text()
    nodes = [*nodes_of(build_node("n1", load_profile(tray))), *FIXED]
    wrong: list[str] = []
    for proc_devices in BEFORE_550 + FROM_550:
        groups = char_groups(_text(proc_devices))
        made = rules(unit, groups, nodes)
        for node in nodes:
            major = major_of(node, groups)
            if major is None:
                continue  # this driver registers no such group: the node cannot exist
            got = allowed(node, major, made, "closed")
            if not set(node.access) <= set(got) or (not node.access and got):
                wrong.append(f"{proc_devices}: {node.path} ({major}:{node.minor}) needs "
                             f"{node.access or 'nothing'}, DeviceAllow= gives {got or 'nothing'}")
    assert wrong == []


def test_every_gpu_is_reached_on_either_driver() -> None:
    """Every /dev/nvidiaN of a GB200 tray, not only nvidiactl, on a text of each driver
    generation; the unit that named only char-nvidia-frontend (and nvidiactl by path)
    reaches nvidiactl and no GPU on the newer one, as these rules find."""
    node = build_node("n1", load_profile("gb200-nvl72"))
    nodes = nodes_of(node)
    gpus = [n for n in nodes if n.groups == GPU_GROUPS]
    assert len(gpus) == len(node.nvml_gpus) == 4
    for proc_devices in (BEFORE_550[0], FROM_550[0]):
        groups = char_groups(_text(proc_devices))
        made = rules(UNIT.read_text(), groups, nodes)
        for gpu in gpus:
            # NV_MAJOR_DEVICE_NUMBER (kernel-open/common/inc/nv-chardev-numbers.h:29)
            assert major_of(gpu, groups) == 195
            assert allowed(gpu, 195, made, "closed") == "rw", (proc_devices, gpu.path)
    old = ("[Service]\nDevicePolicy=closed\nDeviceAllow=/dev/nvidiactl rw\n"
           "DeviceAllow=char-nvidia-frontend rw\n")
    made = rules(old, char_groups(_text(FROM_550[0])), nodes)
    assert allowed(nodes[0], 195, made, "closed") == "rw"  # /dev/nvidiactl
    assert [allowed(gpu, 195, made, "closed") for gpu in gpus] == [""] * 4


def test_the_unit_starts_after_the_driver_is_loaded() -> None:
    """char- names resolve when the unit starts: it is ordered after the services that
    load the driver (systemd-modules-load, nvidia-persistenced), without pulling either in."""
    text = UNIT.read_text()
    after = " ".join(v for line in text.splitlines() if line.startswith("After=")
                     for v in line.split("=", 1)[1].split())
    assert {"systemd-modules-load.service", "nvidia-persistenced.service"} <= set(after.split())
    assert "nvidia-persistenced" not in " ".join(
        line for line in text.splitlines() if line.startswith(("Wants=", "Requires=")))
