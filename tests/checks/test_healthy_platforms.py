"""A healthy simulated node of every platform the simulator lays out passes every check
that runs at its level: judged through the real runner (agent/run/runner.py ``evaluate``,
the path a live run and a saved snapshot share) from what the real collectors read
(tests/snapshots.py). A fail, warn or error here is a simulator bug or a check bug."""

from __future__ import annotations

import pytest

from clusterdiag.agent.run.runner import RunOptions, assign_roles, evaluate, plan
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.profiles.profile import load_profile
from tests.snapshots import healthy_samples, healthy_snapshot, simulated_profiles

PROFILES = simulated_profiles()
NVIDIA = 0x10DE
NVSWITCH_CLASS = 0x0680  # PCI bridge subclass "other", as NVSwitches enumerate


def test_every_laid_out_platform_and_a_baseboard_are_judged() -> None:
    assert {"dgx-h100", "gb200-nvl72", "hgx-h100-8gpu"} <= set(PROFILES)


@pytest.mark.slow
@pytest.mark.parametrize("level", [Level.QUICK, Level.FULL])
@pytest.mark.parametrize("profile", PROFILES)
def test_a_healthy_node_has_no_fail_warn_or_error(profile: str, level: Level) -> None:
    samples = healthy_samples(profile)
    options = RunOptions(level=level, profile=profile)
    report = evaluate(samples.latest, Config(), options,
                      previous=samples.previous if level is Level.FULL else None)
    bad = [f"{f.check} {f.component}: {f.status} {f.message} (observed {f.observed!r}, "
           f"expected {f.expected!r})" for f in report.findings
           if f.status in (Status.FAIL, Status.WARN, Status.ERROR)]
    assert bad == [], "\n".join(bad)
    planned = {spec.id for spec in plan(Config(), options)[0]}
    assert planned <= {f.check for f in report.findings}
    passed = {f.check for f in report.findings if f.status is Status.PASS}
    assert {"gpu.count", "gpu.model"} <= passed
    if level is Level.FULL:  # the rate checks compared two samples rather than skipping
        assert "gpu.pcie_replay_rate" in passed


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_the_healthy_snapshot_is_that_platform(profile: str) -> None:
    snap, expected = healthy_snapshot(profile), load_profile(profile)
    assert snap.nvml is not None
    assert snap.pci is not None
    assert snap.infiniband is not None
    assert len(snap.nvml.gpus) == expected.gpu_count
    assert {g.name for g in snap.nvml.gpus} <= set(expected.gpu_models)
    nvswitches = [d for d in snap.pci if d.vendor == NVIDIA and d.pci_class >> 8 == NVSWITCH_CLASS]
    assert len(nvswitches) == (expected.nvswitch_count or 0)
    assign_roles(snap, Config(), expected)
    roles = [d.role for d in snap.infiniband]
    if expected.compute_hcas is not None:
        assert roles.count("compute") == expected.compute_hcas
    assert roles.count("management") == (expected.nvswitch_mgmt_functions or 0)
