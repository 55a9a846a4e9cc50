"""A profile captured from a DGX H100 (the real ``profiles capture --simulate``) dropped into the
config's ``profile_dir``, with ``profile:`` left to detection: the capture judges the node,
so a half-rate compute port is still ``NOT READY``; the report says which profile was
chosen over which; two equally specific captures are a warn naming both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from tests.conftest import REPO, run_cli

SCHEMA = json.loads((REPO / "reports/schema/node-report.v1.json").read_text())
HALF_RATE = "faults:\n  - {node: n1, kind: ib_rate_degraded, hca: mlx5_4}\n"


def _spec(tmp_path: Path, name: str, faults: str = "") -> Path:
    spec = tmp_path / name
    spec.write_text(f"nodes:\n  - names: n1\n    profile: dgx-h100\n{faults}")
    return spec


def _config(tmp_path: Path, captures: tuple[str, ...]) -> Path:
    """A config whose ``profile_dir`` holds a capture of a healthy DGX H100 under each name."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    healthy = _spec(tmp_path, "healthy.yaml")
    for name in captures:
        proc = run_cli("profiles", "capture", "--simulate", str(healthy),
                       "--output", str(profiles / f"{name}.yaml"))
        assert proc.returncode == 0, proc.stderr
        assert "extends: dgx-h100" in (profiles / f"{name}.yaml").read_text()
    config = tmp_path / "config.yaml"
    config.write_text(f"profile_dir: {profiles}\n")
    return config


def _run(config: Path, spec: Path, fmt: str) -> tuple[int, str]:
    proc = run_cli("run", "--config", str(config), "--simulate", str(spec), "--format", fmt)
    assert not proc.stderr, proc.stderr
    return proc.returncode, proc.stdout


def test_a_captured_dgx_profile_in_profile_dir_keeps_a_half_rate_port_not_ready(
        tmp_path: Path) -> None:
    config = _config(tmp_path, ("site",))
    broken = _spec(tmp_path, "broken.yaml", HALF_RATE)
    code, text = _run(config, broken, "table")
    assert code == 1
    assert text.startswith("n1: NOT READY\n")
    assert "  profile site (auto-detected over dgx-h100) · " in text
    assert re.search(r"FAIL +ib\.rate +mlx5_4/1 .*?observed=200\s+Gb/sec", text, re.S)
    code, out = _run(config, broken, "json")
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    assert report["profile"]["name"] == "site"
    assert report["profile"]["matched"] == ["site", "dgx-h100"]
    assert "site -> dgx-h100 -> hgx-h100-8gpu" in report["profile"]["reason"]
    fails = {(f["check"], f["component"]) for f in report["findings"]
             if f["status"] == "fail"}
    assert fails == {("ib.rate", "mlx5_4/1")}
    # The healthy node passes its capture, without a warning.
    code, out = _run(config, _spec(tmp_path, "again.yaml"), "json")
    assert code == 0
    assert not [f for f in json.loads(out)["findings"] if f["status"] != "pass"
                and f["status"] != "skip"]


def test_two_captures_alike_warn_naming_both_and_still_catch_the_port(
        tmp_path: Path) -> None:
    config = _config(tmp_path, ("rack1", "rack2"))
    code, out = _run(config, _spec(tmp_path, "broken.yaml", HALF_RATE), "json")
    assert code == 1
    report = json.loads(out)
    assert report["profile"]["name"] == "dgx-h100"  # the tie judges by the base both extend
    assert report["profile"]["matched"] == ["dgx-h100", "rack1", "rack2"]
    problems = {(f["check"], f["status"]) for f in report["findings"]
                if f["status"] in ("fail", "warn", "error")}
    assert problems == {("ib.rate", "fail"), ("host.profile", "warn")}
    (warn,) = [f for f in report["findings"] if f["check"] == "host.profile"]
    assert "rack1, rack2 match equally" in warn["observed"]
