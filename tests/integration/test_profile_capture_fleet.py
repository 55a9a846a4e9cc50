"""``clusterdiag profiles capture --from-snapshot FILE...`` (the cluster-wide form) through the
real command: a simulated fleet of five HGX H100 nodes, one of them with a rail gone. The
profile holds the majority's values and no node's name; the odd node is named on standard error
with the key, its value and the majority's; the profile judges a healthy node with no fail and
no warn and the odd one with ib.hca_count failing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

NODES = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("fleet")
    spec = where / "spec.yaml"
    spec.write_text("nodes:\n  - names: gpu[01-05]\n    profile: dgx-h100\n"
                    "faults:\n  - {node: gpu05, kind: hca_missing, hca: mlx5_4}\n")
    snaps = {}
    for node in NODES:
        proc = run_cli("snapshot", "--simulate", str(spec), "--node", node)
        assert proc.returncode == 0, proc.stderr
        snaps[node] = where / f"{node}.json"
        snaps[node].write_text(proc.stdout)
    return snaps


def _capture(fleet: dict[str, Path], out: Path, *extra: str) -> tuple[str, list[str]]:
    args = [a for node in NODES for a in ("--from-snapshot", str(fleet[node]))]
    proc = run_cli("profiles", "capture", *args, *extra, "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    return out.read_text(), [line for line in proc.stderr.splitlines() if "deviates" in line]


def _judged(snapshot: Path, profile: Path) -> tuple[int, list[tuple[str, str, str]]]:
    proc = run_cli("run", "--from-snapshot", str(snapshot), "--profile", str(profile),
                   "--format", "json")
    report = json.loads(proc.stdout)
    return proc.returncode, [(f["check"], f["component"], f["status"])
                             for f in report["findings"]
                             if f["status"] in ("warn", "fail", "error")]


def test_the_majority_profile_names_the_deviating_node(fleet: dict[str, Path],
                                                       tmp_path: Path) -> None:
    text, deviations = _capture(fleet, tmp_path / "fleet.yaml", "--extends", "hgx-h100-8gpu")
    values = {m[1]: m[2] for m in re.finditer(r"^(\w+): (.+?)  #", text, re.M)}
    assert values["compute_hcas"] == "8"
    assert "4 of 5 snapshots" in text
    assert "the majority of 5 snapshots" in text
    for node in NODES:  # no node's name in the profile
        assert node not in text
    # The rail gone: one NIC fewer, and its GPU's nearest rail now across the host bridge.
    assert deviations == [
        "clusterdiag profiles capture: deviates: gpu05: compute_hcas 7, the majority 8 "
        "(4 of 5 snapshots)",
        'clusterdiag profiles capture: deviates: gpu05: gpu_nic_distance ["PIX", "NODE"], '
        'the majority ["PIX"] (4 of 5 snapshots)']


def test_the_majority_profile_judges_the_fleet(fleet: dict[str, Path], tmp_path: Path) -> None:
    profile = tmp_path / "fleet.yaml"
    _capture(fleet, profile)  # no --extends: the base most snapshots detect as
    assert "extends: dgx-h100" in profile.read_text()
    assert _judged(fleet["gpu01"], profile) == (0, [])
    rc, bad = _judged(fleet["gpu05"], profile)
    assert rc == 1
    assert ("ib.hca_count", "node", "fail") in bad


def test_a_bad_snapshot_is_one_line_and_exit_2(fleet: dict[str, Path], tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    proc = run_cli("profiles", "capture", "--from-snapshot", str(fleet["gpu01"]),
                   "--from-snapshot", str(junk))
    assert proc.returncode == 2
    assert "junk.json: not JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert run_cli("profiles", "capture", "--from-snapshot", str(junk), "--simulate",
                   "dgx-h100").returncode == 2
