"""Every expected value and floor is in the unit its tool prints: a healthy GPU's
``device_local_copy`` figure, as nvbandwidth prints it (a copy rate: bytes copied once per
second, src/memcpy.cpp:483; NVIDIA/nvbandwidth#48), passes against its own profile, and a
GPU at half of it fails. HBM figures counted read+write (DCGM's memory_bandwidth,
BabelStream Copy) are twice the copy rate: compared with them, every healthy GPU failed."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify.parsers import nvbandwidth
from clusterdiag.agent.qualify.run import assign_tests
from clusterdiag.checks.catalogs.manifest import ACTIVE
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.profiles.profile import builtin_names, load_builtin
from clusterdiag.checks.qualify.judge import StragglerRule, expectations, judge

# A healthy GPU's device_local_copy copy rate (GB/s) per profile that expects one. Only the
# H100 figure is measured with a device-to-device copy (~3.0 TB/s counting bytes read and
# written, on a real H100 SXM); the others are half of a read+write measurement of the
# same memory, as the profile's own source gives it.
HEALTHY_COPY = {
    "dgx-a100": 805.0,  # Azure guide BabelStream Copy 1.61 TB/s read+write
    "dgx-b200": 2715.0,  # DCGM diag-skus.yaml: dcgmproftester 5.43 TB/s (lowest B200 id)
    "dgx-h100": 1500.0,  # measured: ~3.0 TB/s read+write on a real H100 SXM
    "dgx-h200": 2005.0,  # Azure guide BabelStream Copy 4.01 TB/s read+write
    "gb300-nvl72": 3015.0,  # DCGM diag-skus.yaml: dcgmproftester 6.03 TB/s (id 31c2)
}
GPUS = 8


def _output(per_gpu: list[float]) -> str:
    """nvbandwidth v0.8's output of ``-t device_local_copy`` (output.cpp:31-51, 160-181;
    inline_common.h:64-108; testcases_ce.cpp:225)."""
    labels = "  " + "".join(f"{i:>10}" for i in range(len(per_gpu)))
    row = f"{0:>2}" + "".join(f"{v:>10.2f}" for v in per_gpu)
    return "\n".join([
        "nvbandwidth Version: v0.8", "Built from Git version: v0.8", "",
        "CUDA Runtime Version: 12080", "CUDA Driver Version: 12080",
        "Driver Version: 570.124.06", "", "node1",
        *(f"Device {i}: NVIDIA GPU ({i:08x}:{0x18 + i:02x}:00)" for i in range(len(per_gpu))),
        "", "Running device_local_copy.", "memcpy local GPU(column) bandwidth (GB/s)",
        labels, row, "", f"SUM device_local_copy {sum(per_gpu):.2f}", "",
        "NOTE: The reported results may not reflect the full capabilities of the platform.",
        "Performance can vary with software drivers, hardware clocks, and system topology.",
        ""])


def _run(node: str, per_gpu: list[float]) -> ToolRun:
    """The figures a node's nvbandwidth run gives ``qualify.hbm``, as a live run reads them,
    with the repeat a suspect gets (the same figures again): a conviction needs both."""
    run = ToolRun("nvbandwidth", node, "nvbandwidth", "nvbandwidth -t device_local_copy", 0)
    nvbandwidth.parse(_output(per_gpu), run)
    assign_tests(run, "nvbandwidth")
    for figure in run.figures:
        figure.values.append(figure.values[0])
    return run


def _hbm(profile: str, values: dict[str, list[float]]) -> dict[str, list[tuple[str, Status,
                                                                              Action]]]:
    runs = [_run(node, per_gpu) for node, per_gpu in values.items()]
    result = judge(runs, dict.fromkeys(values, profile),
                   {profile: expectations(load_builtin(profile))}, StragglerRule())
    assert result.cluster == [], result.cluster
    return {node: [(f.component, f.status, f.action) for f in own if f.check == "qualify.hbm"]
            for node, own in result.findings.items()}


def test_every_profile_that_expects_hbm_has_a_healthy_figure_here() -> None:
    declaring = {n for n in builtin_names() if "hbm" in load_builtin(n).qualify}
    assert declaring == set(HEALTHY_COPY)


@pytest.mark.parametrize("profile", sorted(HEALTHY_COPY))
def test_a_healthy_copy_rate_passes_against_its_profile(profile: str) -> None:
    """Four nodes of eight healthy GPUs (1 % apart), judged by floor, peers and the
    profile's expected figure: nothing but passes."""
    healthy = HEALTHY_COPY[profile]
    values = {f"n{k}": [healthy * (1 - 0.01 * ((k + i) % 2)) for i in range(GPUS)]
              for k in range(4)}
    found = _hbm(profile, values)
    assert {status for own in found.values() for _, status, _ in own} == {Status.PASS}, found


@pytest.mark.parametrize("profile", sorted(HEALTHY_COPY))
def test_half_a_healthy_copy_rate_fails_on_the_floor_alone(profile: str) -> None:
    """A node alone (no peers to compare with): the floor, in the unit nvbandwidth prints,
    fails a GPU at half the healthy copy rate and passes the healthy ones."""
    healthy = HEALTHY_COPY[profile]
    found = _hbm(profile, {"n1": [healthy, healthy * 0.5]})
    assert sorted(found["n1"]) == [("gpu1", Status.FAIL, Action.DRAIN)], found


@pytest.mark.parametrize("profile", sorted(HEALTHY_COPY))
def test_a_gpu_at_half_its_peers_copy_rate_fails(profile: str) -> None:
    healthy = HEALTHY_COPY[profile]
    values = {f"n{k}": [healthy] * GPUS for k in range(4)}
    values["n2"][3] = healthy * 0.5
    found = _hbm(profile, values)
    bad = [(node, part, status) for node, own in found.items() for part, status, _ in own
           if status is not Status.PASS]
    assert bad == [("n2", "gpu3", Status.FAIL)], found


def test_expected_and_floor_share_the_declared_unit() -> None:
    """Every built-in profile's qualify entry is in its test's declared unit (the rule
    site profiles are held to, checks/profiles/profile.py qualify_problem)."""
    for name in builtin_names():
        for test, entry in load_builtin(name).qualify.items():
            assert entry["unit"] == ACTIVE[test]["unit"], (name, test)
            if "expected" in entry and "floor" in entry:
                assert entry["floor"] <= entry["expected"], (name, test)
