"""``clusterdiag qualify`` without ``--tests`` runs every test that applies, prints its
schedule and estimated duration before starting (on stderr), and refuses one that cannot
fit ``--budget`` unless told to run what fits. Through the CLI, on simulated clusters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.settings.config import Config
from tests.conftest import run_cli

NODE = {"allreduce", "allreduce_net", "allreduce_ring", "d2d", "d2h", "dcgm", "gpu_compute",
        "h2d", "hbm", "nic"}
SLOW_CABLE = [{"node": "q3", "kind": "cable_slow", "hca": "mlx5_4"}]


def _spec(tmp_path: Path, nodes: list[dict[str, Any]],
          faults: list[dict[str, Any]] | None = None) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({"nodes": nodes, "faults": faults or []}))
    return str(path)


def _h100(tmp_path: Path, names: str = "q[1-8]",
          faults: list[dict[str, Any]] | None = None) -> str:
    return _spec(tmp_path, [{"names": names, "profile": "dgx-h100"}], faults)


def _report(proc: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_default_tests_find_a_slow_cable_on_eight_nodes(tmp_path: Path) -> None:
    """q3's mlx5_4 cable delivers 80 %: its loopback (a node test) passes, only the
    tests between nodes see it, and they must run without being asked for."""
    proc = run_cli("qualify", "--simulate", _h100(tmp_path, faults=SLOW_CABLE), "--format",
                   "json", timeout=180)
    assert proc.returncode == 1, proc.stderr
    data = _report(proc)  # stdout is the report alone: the schedule went to stderr
    assert data["bad_nodes"] == "q3"
    assert set(data["qualify"]["tests"]) == NODE | {"pairs", "rails", "scaling"}


def test_the_schedule_is_said_on_stderr_before_the_run(tmp_path: Path) -> None:
    proc = run_cli("qualify", "--simulate", _h100(tmp_path), "--format", "json", timeout=180)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("qualify: 8 nodes, level quick"), proc.stderr
    groups = [line.split()[0] for line in lines[1:-1]]
    assert groups == ["node", "node", "pairs", "pairs", "rails", "rails", "scaling"]
    assert "6 rounds" in lines[-2]  # scaling at 2, 4 and 8 nodes, Ring and default
    assert lines[-1].startswith("  total: ")
    assert "budget 1 h 0 min" in lines[-1]
    _report(proc)


@pytest.mark.parametrize(("names", "groups"), [
    ("q1", set()),
    ("q[1-2]", {"pairs", "rails"}),
    ("q[1-3]", {"pairs", "rails"}),
    ("q[1-4]", {"pairs", "rails", "scaling"}),
])
def test_defaults_follow_the_node_count(tmp_path: Path, names: str, groups: set[str]) -> None:
    report = run(Request(simulate=_h100(tmp_path, names)), Config())
    assert set(report.tests) == NODE | groups


def test_rack_runs_by_default_on_nvl72_racks_only(tmp_path: Path) -> None:
    racked = _spec(tmp_path, [{"names": "t[1-4]", "profile": "gb200-nvl72", "rack": "r1"}])
    assert "rack" in run(Request(simulate=racked), Config()).tests
    loose = _spec(tmp_path, [{"names": "t[1-4]", "profile": "gb200-nvl72"}])
    assert "rack" not in run(Request(simulate=loose), Config()).tests
    h100 = _spec(tmp_path, [{"names": "q[1-4]", "profile": "dgx-h100", "rack": "r1"}])
    assert "rack" not in run(Request(simulate=h100), Config()).tests


def test_no_rails_where_the_nodes_have_none(tmp_path: Path) -> None:
    """A PCIe box whose profile does not count its NICs and whose nodes have no InfiniBand
    port: no rails between nodes, and no loopback either."""
    report = run(Request(simulate=_spec(tmp_path, [{"names": "p[1-4]",
                                                    "profile": "hgx-h100-pcie"}])), Config())
    assert not {"rails", "nic", "allreduce_net"} & set(report.tests)
    assert {"pairs", "scaling"} <= set(report.tests)


def test_a_schedule_over_the_budget_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = run_cli("qualify", "--simulate", _h100(tmp_path), "--budget", "300", "--format",
                   "json", "--output", str(out), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("clusterdiag:")]
    assert len(errors) == 1, proc.stderr
    assert "estimated at 6 min" in errors[0]
    assert "budget of 5 min 0 s" in errors[0]
    for way in ("raise --budget", "narrow --tests", "add --fit-budget"):
        assert way in errors[0]
    assert not out.exists()  # nothing ran


def test_the_config_budget_is_checked_too(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("qualify: {budget_s: 60}\n")
    proc = run_cli("qualify", "--simulate", _h100(tmp_path), "--config", str(config),
                   timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "budget of 1 min 0 s" in proc.stderr


@pytest.mark.parametrize("budget", ["nan", "-5", "0"])
def test_an_impossible_budget_is_a_usage_error(tmp_path: Path, budget: str) -> None:
    proc = run_cli("qualify", "--simulate", _h100(tmp_path), "--budget", budget, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--budget" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fit_budget_drops_what_does_not_fit_last_first_and_says_so(tmp_path: Path) -> None:
    """6 min 55 s planned, 6 min 40 s allowed: scaling (53 s) is left out, the rest runs and
    still finds the slow cable."""
    proc = run_cli("qualify", "--simulate", _h100(tmp_path, faults=SLOW_CABLE), "--budget",
                   "400", "--fit-budget", "--format", "json", timeout=180)
    assert proc.returncode == 1, proc.stderr
    data = _report(proc)
    assert data["bad_nodes"] == "q3"
    assert set(data["qualify"]["tests"]) == NODE | {"pairs", "rails"}
    (note,) = [n for n in data["qualify"]["notes"] if n.startswith("--fit-budget")]
    assert "left out scaling (53 s)" in note
    assert "ran node, pairs, rails" in note
    assert "--fit-budget" in proc.stderr


def test_fit_budget_keeps_the_node_tests_first(tmp_path: Path) -> None:
    """Room for the node tests alone (5 min 39 s of 5 min 45 s): every test between nodes
    is left out."""
    report = run(Request(simulate=_h100(tmp_path), budget=345, fit_budget=True), Config())
    assert set(report.tests) == NODE
    assert any("left out pairs" in n and "rails" in n and "scaling" in n
               for n in report.notes), report.notes


def test_fit_budget_with_nothing_that_fits_is_refused(tmp_path: Path) -> None:
    proc = run_cli("qualify", "--simulate", _h100(tmp_path), "--budget", "30",
                   "--fit-budget", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "not even the node tests fit" in proc.stderr


def test_an_explicit_tests_list_is_estimated_and_run_alone(tmp_path: Path) -> None:
    proc = run_cli("qualify", "--simulate", _h100(tmp_path, faults=SLOW_CABLE), "--tests",
                   "pairs", "--format", "json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert [line.split()[0] for line in proc.stderr.splitlines()[1:-1]] == ["pairs", "pairs"]
    assert _report(proc)["qualify"]["tests"] == ["pairs"]
