"""``clusterdiag validate`` against the fleet's medians, end to end on the simulator: a
``qualify --medians FILE`` over healthy nodes records them; a node whose every GPU is slow
alike (its own GPUs' median hides it, and the H100 profile has no compute floor) passes
its validation without them and fails it with them, with the fleet's median in the figure.
A file that cannot be used is never a fail: the node is judged as before, and the outcome
says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clusterdiag.agent.base.errors import ExitCode
from clusterdiag.agent.health import store
from clusterdiag.agent.health.incident import incident_from
from clusterdiag.agent.health.lifecycle import Basis, Health, State
from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Finding, Status
from tests.conftest import run_cli

GPUS = 8


def _spec(tmp_path: Path, name: str, names: str, faults: list[dict[str, object]]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"names": names, "profile": "dgx-h100"}],
                                    "faults": faults}))
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The medians of four healthy nodes' node tests, recorded by qualify."""
    where = tmp_path_factory.mktemp("fleet")
    spec = _spec(where, "fleet", "f[1-4]", [])
    path = where / "medians.json"
    done = run_cli("qualify", "--simulate", str(spec), "--tests", "node", "--medians",
                   str(path), "--format", "json")
    assert done.returncode == ExitCode.READY, done.stderr
    assert "recorded 9 fleet medians" in done.stdout
    return path


def _validate(tmp_path: Path, spec: Path, medians: Path | None) -> tuple[int, str, Health]:
    state = tmp_path / "state"
    state.mkdir(parents=True)
    health = Health()
    health.drain(incident_from(Finding(Status.FAIL, "gpu3", "slow", check="qualify.gpu_compute"),
                               1_000_000.0))
    store.save(state, health)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"qualify": {"medians_file": str(medians)}}
                                     if medians is not None else {}))
    done = run_cli("validate", "--simulate", str(spec), "--node", "n1", "--state-dir",
                   str(state), "--config", str(config))
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout.strip(), store.load(state)


def _slow_node(tmp_path: Path) -> Path:
    return _spec(tmp_path, "slow", "n1", [{"node": "n1", "kind": "gpu_slow", "gpu": gpu,
                                           "factor": 0.7} for gpu in range(GPUS)])


def test_a_node_slow_as_a_whole_passes_alone_and_fails_against_the_fleet(
        tmp_path: Path, fleet: Path) -> None:
    code, said, _ = _validate(tmp_path / "alone", _slow_node(tmp_path), None)
    assert (code, said) == (ExitCode.READY,
                            "passed: qualify.gpu_compute gpu3 (qualify): gpu_compute passed")
    code, said, health = _validate(tmp_path, _slow_node(tmp_path), fleet)
    assert code == ExitCode.FAIL, said
    assert said.startswith("failed: qualify.gpu_compute gpu3 (qualify): qualify.gpu_compute ")
    assert "below the fleet's median" in said
    median = next(m["median"] for m in json.loads(fleet.read_text())["medians"]
                  if m["test"] == "gpu_compute")
    assert f'"fleet_median":{round(median, 2)}' in said
    assert health.state is State.DRAINED
    # the drain reason's figure names what convicted it: the fleet's median, above the
    # node's own GPUs' (which the slow node's figure is not below)
    reading = health.last.reading if health.last else None
    assert reading is not None
    assert reading.basis is Basis.FLEET, reading
    assert reading.observed < reading.expected == pytest.approx(median, rel=1e-3)


def test_a_healthy_node_passes_against_the_fleet_and_says_so(tmp_path: Path,
                                                             fleet: Path) -> None:
    code, said, health = _validate(tmp_path, _spec(tmp_path, "healthy", "n1", []), fleet)
    assert (code, health.state) == (ExitCode.READY, State.HEALTHY), said
    assert said.endswith("gpu_compute passed; judged against the fleet's medians of "
                         "dgx-h100 too")


@pytest.mark.parametrize(("body", "why"), [
    (None, "No such file or directory"),
    (b'{"schema": "clusterdiag/qualify-medians/v1", "medians": [{"median": NaN}]}',
     "a name that is not a short printable string"),
    (b"x" * ((1 << 20) + 1), "larger than 1048576 bytes"),
    ("stale", "are not recent (400 days old"),
])
def test_a_file_that_cannot_be_used_never_fails_the_node(
        tmp_path: Path, fleet: Path, body: bytes | str | None, why: str) -> None:
    path = tmp_path / "medians.json"
    if body == "stale":
        data = json.loads(fleet.read_text())
        for entry in data["medians"]:
            entry["at"] -= 400 * 86400
        path.write_text(json.dumps(data))
    elif isinstance(body, bytes):
        path.write_bytes(body)
    code, said, health = _validate(tmp_path, _slow_node(tmp_path), path)
    assert (code, health.state) == (ExitCode.READY, State.HEALTHY), said
    assert "gpu_compute passed; the fleet's medians not used: " in said
    assert why in said


def test_a_run_over_another_profile_keeps_the_fleets_other_medians(
        tmp_path: Path, fleet: Path) -> None:
    path = tmp_path / "medians.json"
    path.write_bytes(fleet.read_bytes())
    before = json.loads(path.read_text())["medians"]
    spec = tmp_path / "a100.yaml"
    spec.write_text(yaml.safe_dump({"nodes": [{"names": "a[1-3]", "profile": "dgx-a100"}]}))
    config = Config(data={**Config().data, "qualify": {**Config().section("qualify"),
                                                      "medians_file": str(path)}})
    report = run(Request(simulate=str(spec), tests="node"), config)
    assert any(n.startswith("recorded ") and str(path) in n for n in report.notes)
    after = json.loads(path.read_text())["medians"]
    assert [m for m in after if m["profile"] == "dgx-h100"] == before
    assert {m["test"] for m in after if m["profile"] == "dgx-a100"} >= {"gpu_compute", "hbm"}


def test_a_medians_file_that_is_not_one_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    path = tmp_path / "medians.json"
    path.write_text('{"schema": "clusterdiag/qualify-medians/v1", "medians": [{"median": -1}]}')
    done = run_cli("qualify", "--simulate", str(_spec(tmp_path, "f", "f[1-3]", [])),
                   "--tests", "node", "--medians", str(path))
    assert done.returncode == ExitCode.USAGE
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"clusterdiag: medians file {path}: median #0: ")
    assert "schedule" not in done.stderr
    assert "Traceback" not in done.stderr
