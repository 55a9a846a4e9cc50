"""Golden node and cluster reports (tests/golden.py makes them): what the command prints
today, compared with tests/golden/, so a change that alters a report shows as a diff."""

from __future__ import annotations

import difflib

import pytest

from clusterdiag.agent.model.version import VERSION
from tests.golden import GOLDEN, NODES, demo_reports, mask_json, mask_text, node_report

REGENERATE = "python -m dev.regenerate"


def compare(name: str, actual: str) -> None:
    """``actual`` against tests/golden/``name``, with the diff when they differ."""
    path = GOLDEN / name
    if not path.is_file():
        pytest.fail(f"no golden file tests/golden/{name}: run {REGENERATE} and commit it")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                         f"golden/{name}", "today", lineterm="", n=2))
        shown = "\n".join(diff[:120]) + (f"\n... {len(diff) - 120} more diff lines"
                                         if len(diff) > 120 else "")
        pytest.fail(f"{name} differs from the golden report (if the change is meant, run "
                    f"{REGENERATE} and review the diff):\n{shown}", pytrace=False)


@pytest.mark.parametrize("fmt", ["json", "table"])
@pytest.mark.parametrize("name", sorted(NODES))
def test_node_report_matches_golden(name: str, fmt: str) -> None:
    compare(*node_report(name, fmt))


def test_demo_cluster_report_matches_golden() -> None:
    for name, text in demo_reports().items():
        compare(name, text)


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
