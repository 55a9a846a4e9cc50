"""``clusterdiag demo``: the README's first command. It starts agents on loopback, gathers
over HTTP, reports a not-ready cluster (exit 1) in time, and leaves nothing listening."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest

from clusterdiag.agent.cluster import demo
from clusterdiag.agent.cluster.demo import run_demo
from tests.conftest import REPO, run_cli


def test_demo_reports_the_planted_faults_and_exits_1(tmp_path: Path) -> None:
    exclude = tmp_path / "exclude"
    # ~7 s on an idle 2-core machine, several times that on a loaded one: the timeout is
    # a guard against a hang, how long the demo takes is not what this test is about
    proc = run_cli("demo", "--exclude-file", str(exclude), timeout=180)
    assert proc.returncode == 1, proc.stderr
    banner, *lines = proc.stdout.splitlines()
    assert banner == "DEMO: a simulated cluster, 34 nodes, 5 planted faults (no real hardware read)"
    assert lines[0].startswith("NOT READY: ")
    assert "of 34 nodes ready" in lines[0]
    bad = exclude.read_text().strip()
    assert lines[1] == f"exclude ({len(_expand(bad))}): {bad}"
    for node in ("gpu003", "gpu016", "nvl1-tray05"):
        assert node in _expand(bad), bad
    assert "gpu011" not in _expand(bad)  # a driver outlier warns, it does not exclude
    text = proc.stdout
    assert "tray in another NVLink partition than its rack" in text
    assert "GPU driver differs from the majority of dgx-h100 nodes" in text
    assert "unreachable (1): gpu016" in text


def _expand(nodeset: str) -> list[str]:
    from ClusterShell.NodeSet import NodeSet

    return list(NodeSet(nodeset))


def test_demo_json_matches_the_schema_and_names_the_rack(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = run_cli("demo", "--format", "json", "--output", str(out), timeout=60)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    schema = json.loads((REPO / "reports/schema/cluster-report.v1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["via"] == "agent"
    assert not data["ready"]
    trays = [n for n in data["nodes"] if n["profile"] == "gb200-nvl72"]
    assert len(trays) == 18
    assert {n["rack"] for n in trays} == {"nvl1"}


def test_demo_with_another_spec_and_a_bad_one(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: h[1-3]\n    profile: dgx-h100\n")
    proc = run_cli("demo", "--spec", str(spec), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("DEMO: a simulated cluster, 3 nodes, no faults (no real "
                                  "hardware read)\nREADY: 3 of 3 nodes ready, 24 of 24 GPUs")
    spec.write_text("nodes:\n  - names: h[1-3]\n    profile: dgx-h100\nfaults:\n"
                    "  - {node: h9, kind: node_unreachable}\n")
    proc = run_cli("demo", "--spec", str(spec), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "no node 'h9'" in proc.stderr


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((parts.hostname or "", parts.port or 0)) == 0


def test_sigterm_stops_every_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: h[1-4]\n    profile: dgx-h100\n")
    seen: dict[str, str] = {}

    def interrupted(*args: Any, urls: dict[str, str], **kwargs: Any) -> Any:
        seen.update(urls)
        assert all(_listening(u) for u in urls.values())
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("SIGTERM did not interrupt the demo")

    monkeypatch.setattr(demo, "gather_and_judge", interrupted)
    with pytest.raises(SystemExit) as stopped:
        run_demo(spec, None, None)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert len(seen) == 4
    assert not any(_listening(u) for u in seen.values())
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
