"""Our own configuration or clock must not blame the hardware.

A budget or interval below its floor (agent/settings/config.py: MIN_BUDGET_S, SLURM_MIN_BUDGET_S,
MIN_INTERVAL_S) is a usage error for ``run``, ``snapshot`` and ``agent`` (exit 2, one
line) and one loud line with exit 0 for the Slurm entry points, never a GPU timeout, a
reboot action or a drain. Rate checks measure the interval on the boot clock, so a wall
clock step between two samples neither errors the node nor inflates a rate. A ``--checks``
glob that selects nothing is exit 2 naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.integration.test_prolog_cli import Slurm, slurm_run, write_config

CLOCK_STEP = REPO / "tests" / "fixtures" / "clock_step"


def _one_line(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "ERROR" in line or
             line.startswith("clusterdiag:")]
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("program", ["prolog", "epilog", "healthcheck"])
@pytest.mark.parametrize("budget", [0, 0.5, -1, ".nan", ".inf", 5])
def test_a_slurm_budget_below_its_floor_is_loud_and_drains_nothing(
        tmp_path: Path, program: str, budget: object) -> None:
    slurm = Slurm(tmp_path)
    (tmp_path / "spec.yaml").write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n")
    config = write_config(tmp_path, slurm, **{program: {"budget_s": "BUDGET"}})
    config.write_text(config.read_text().replace('"BUDGET"', str(budget)))  # YAML: .nan
    proc = slurm_run(program, tmp_path, "n1")
    line = _one_line(proc, 0, f"{program}.budget_s")
    assert "gpu.responsive" not in proc.stderr
    assert "reboot" not in proc.stderr
    assert slurm.updates() == [], line


@pytest.mark.parametrize("command", ["run", "snapshot"])
@pytest.mark.parametrize("budget", ["0.4", "0", "-1", "nan", "inf"])
def test_a_budget_flag_below_the_floor_is_a_usage_error(command: str, budget: str) -> None:
    proc = run_cli(command, "--simulate", "dgx-h100", "--budget", budget)
    _one_line(proc, 2, "--budget")
    assert "gpu.responsive" not in proc.stdout


@pytest.mark.parametrize(("key", "value"), [("budget_s", 0.5), ("full_interval_s", 0),
                                            ("agent", {"interval_s": 0.05}),
                                            ("agent", {"refresh_min_interval_s": -1}),
                                            ("cluster", {"read_timeout_s": 0}),
                                            ("epilog", {"grace_s": -1})])
def test_config_values_below_their_floor_are_usage_errors(tmp_path: Path, key: str,
                                                          value: object) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({key: value}))
    proc = run_cli("run", "--simulate", "dgx-h100", "--config", str(config))
    name = key if not isinstance(value, dict) else f"{key}.{next(iter(value))}"
    _one_line(proc, 2, name)


@pytest.mark.parametrize("interval", ["nan", "0", "0.05", "inf"])
def test_agent_interval_is_checked_before_it_starts(tmp_path: Path, interval: str) -> None:
    proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir", str(tmp_path / "s"),
                   "--listen", "127.0.0.1:0", "--interval", interval, timeout=30)
    _one_line(proc, 2, "--interval")


def test_an_interval_shorter_than_the_budget_stays_valid(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"budget_s": 10, "agent": {"interval_s": 5}}))
    proc = run_cli("run", "--simulate", "dgx-h100", "--config", str(config))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("globs", "named"), [("nvlnk.*", "nvlnk.*"),
                                              ("gpu.*,nvlnk.*", "nvlnk.*")])
def test_a_checks_glob_that_selects_nothing_is_a_usage_error(globs: str, named: str) -> None:
    proc = run_cli("run", "--simulate", "dgx-h100", "--checks", globs)
    _one_line(proc, 2, repr(named))


@pytest.mark.parametrize("step_s", [-3600.0, -2.9, 2.9, 3600.0])
def test_a_wall_clock_step_between_samples_changes_no_rate(step_s: float) -> None:
    """``run --level full`` samples twice, 3 s apart; the wall clock is stepped between."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(CLOCK_STEP),
                                                       os.environ.get("PYTHONPATH")])),
           "CLOCK_STEP_S": str(step_s)}
    proc = subprocess.run([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                           "dgx-h100", "--level", "full", "--format", "json"],
                          capture_output=True, text=True, timeout=90, check=False,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    rates = [f for f in report["findings"] if f["check"].endswith("_rate")]
    assert rates
    assert all(f["status"] in ("pass", "skip") for f in rates), [
        (f["check"], f["status"], f["message"]) for f in rates if f["status"] != "pass"]
    assert any(f["status"] == "pass" for f in rates)
