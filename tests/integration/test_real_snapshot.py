"""A snapshot taken by clusterdiag on a real H200 re-judged offline, and the simulator
compared with it GPU by GPU (one GPU of a bigger board is not a whole dgx-h200)."""

from __future__ import annotations

import json
import time

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status
from tests.conftest import REPO

REAL = REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json"


def _real() -> Snapshot:
    return Snapshot.from_dict(json.loads(REAL.read_text()))


def test_real_h200_snapshot_is_ready_and_its_platform_ambiguous() -> None:
    report = evaluate(_real(), Config(), RunOptions())
    assert report.profile["name"] == "generic"
    fails = [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR)]
    assert not fails, fails
    warns = [f.check for f in report.findings if f.status is Status.WARN]
    assert warns == ["host.profile"]
    nvlink = [f for f in report.findings if f.check.startswith("nvlink.")]
    assert nvlink
    assert all(f.status is Status.SKIP for f in nvlink)


def test_simulated_h200_gpu_agrees_with_the_real_one() -> None:
    real = _real().nvml
    env = env_for(NodeSpec("sim", "dgx-h200"))
    sim = collect_snapshot(env, ["nvml"], time.monotonic() + 10).nvml
    assert real is not None
    assert sim is not None
    r, s = real.gpus[0], sim.gpus[0]
    for field in ("name", "architecture", "memory_total_bytes", "vbios", "board_part_number",
                  "inforom_image", "ecc_enabled", "ecc_pending", "slowdown_temperature_c",
                  "remap_pending", "remap_failure", "recovery_action", "persistence_mode",
                  "mig_enabled", "pcie_gen_current", "pcie_width_current", "power_limit_w",
                  "sram_threshold_exceeded", "unrepairable_memory"):
        assert getattr(s, field) == getattr(r, field), field
    assert set(r.remap_histogram or {}) == set(s.remap_histogram or {})
    # Retired pages: NotSupported on both (a pre-Ampere mechanism).
    assert {k for k in r.unsupported if k.startswith("retired")} == \
        {k for k in s.unsupported if k.startswith("retired")}
