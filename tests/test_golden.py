"""Golden node and cluster reports: what the command prints today, kept under tests/golden/,
so a change that alters a report shows as a diff in review.

Reports are rendered by the real command (the node table and JSON of ``run --simulate``)
or by the demo's own path (``run_demo`` then the CLI's ``emit``), then the parts that
legitimately differ between runs are masked (MASKED_KEYS, TEXT_MASKS). A feature that
changes output regenerates the files and the commit shows the diff:

    .venv/bin/python -m pytest tests/test_golden.py --update-golden
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.cli.emit import emit
from clusterdiag.agent.cluster.demo import run_demo
from clusterdiag.agent.model.version import VERSION
from tests.conftest import REPO, run_cli

GOLDEN = REPO / "tests/golden"
CONFIG = GOLDEN / "config.yaml"
NODES = {"dgx-h100": "dgx-h100", "gb200-nvl72": "gb200-nvl72",
         "faulty-node": str(GOLDEN / "faulty-node.yaml")}

# JSON keys whose values differ on every run: clocks, how long things took.
MASKED_KEYS = frozenset({"started_at", "generated_at", "taken_at", "duration_s", "seconds"})
# Checks whose observed value is the machine running the test, not the simulated node:
# host.disk takes statvfs of the simulated root, a temporary directory on this machine.
HOST_DEPENDENT = frozenset({"host.disk"})
TEXT_MASKS = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"· \d+(?:\.\d+)? s ·"), "· <seconds> s ·"),
    (re.compile(r"clusterdiag " + re.escape(VERSION) + r"\b"), "clusterdiag <version>"),
    (re.compile(r"^(\s*\w+\s+(?:" + "|".join(map(re.escape, HOST_DEPENDENT))
                + r")\s.*\(observed=)[^,)]*", re.M), r"\1<this machine>"),
)


def mask_json(value: Any, key: str | None = None) -> Any:
    """``value`` with run-to-run differences replaced by ``<key>`` placeholders."""
    if key in MASKED_KEYS and value is not None:
        return f"<{key}>"
    if key == "version" and value == VERSION:
        return "<version>"  # clusterdiag's own (nodes' and the report's), not a driver's
    if isinstance(value, list):
        return [mask_json(item) for item in value]
    if isinstance(value, dict):
        masked = {k: mask_json(v, k) for k, v in value.items()}
        if masked.get("check") in HOST_DEPENDENT and "observed" in masked:
            masked["observed"] = "<this machine>"
        return masked
    return value


def mask_text(text: str) -> str:
    for pattern, replacement in TEXT_MASKS:
        text = pattern.sub(replacement, text)
    return text


def masked(name: str, text: str) -> str:
    if name.endswith(".json"):
        return json.dumps(mask_json(json.loads(text)), indent=1) + "\n"
    return mask_text(text)


def compare(request: pytest.FixtureRequest, name: str, text: str) -> None:
    """Compare with tests/golden/``name``, or rewrite it under ``--update-golden``."""
    path = GOLDEN / name
    actual = masked(name, text)
    if request.config.getoption("--update-golden"):
        path.write_text(actual, encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(f"no golden file {path.relative_to(REPO)}: run pytest {__file__} "
                    "--update-golden and commit it")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                         f"golden/{name}", "today", lineterm="", n=2))
        shown = "\n".join(diff[:120]) + (f"\n... {len(diff) - 120} more diff lines"
                                         if len(diff) > 120 else "")
        pytest.fail(f"{name} differs from the golden report (if the change is meant, rerun "
                    f"with --update-golden and review the diff):\n{shown}", pytrace=False)


@pytest.mark.parametrize("fmt", ["json", "table"])
@pytest.mark.parametrize("name", sorted(NODES))
def test_node_report_matches_golden(request: pytest.FixtureRequest, name: str,
                                    fmt: str) -> None:
    proc = run_cli("run", "--simulate", NODES[name], "--config", str(CONFIG), "--format", fmt)
    assert proc.returncode == (1 if name == "faulty-node" else 0), proc.stderr
    assert proc.stderr == ""
    compare(request, f"node-{name}.{'json' if fmt == 'json' else 'txt'}", proc.stdout)


def test_demo_cluster_report_matches_golden(request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    report = run_demo(None, CONFIG, None)
    for fmt in ("json", "md"):
        out = tmp_path / f"cluster.{fmt}"
        assert emit(report, fmt, out, None) == 1  # the demo plants faults: not ready
        compare(request, f"cluster-demo.{fmt}", out.read_text(encoding="utf-8"))


def test_masks_hide_only_what_varies() -> None:
    data = {"started_at": "2026-01-01T00:00:00+00:00", "version": VERSION, "node": "n1",
            "findings": [{"check": "host.disk", "observed": 97.3},
                         {"check": "gpu.count", "observed": 8}],
            "driver": {"version": "550.54.15"}}
    assert mask_json(data) == {
        "started_at": "<started_at>", "version": "<version>", "node": "n1",
        "findings": [{"check": "host.disk", "observed": "<this machine>"},
                     {"check": "gpu.count", "observed": 8}],
        "driver": {"version": "550.54.15"}}
    line = "  PASS  host.disk                /tmp           enough free space  " \
           "(observed=97.34, expected=>= 5% free)"
    assert mask_text(line) == line.replace("97.34", "<this machine>")
    assert mask_text("level quick · 0.21 s · simulated") == "level quick · <seconds> s · simulated"
    assert mask_text("  PASS  gpu.count  node  ok  (observed=8, expected=8)") == \
        "  PASS  gpu.count  node  ok  (observed=8, expected=8)"
