"""The table's profile line (reports/render/table.py): where detection matched several
profiles it names those passed over; a saved report's list is input, so only its strings
are shown, escaped, and a few of them."""

from __future__ import annotations

from typing import Any

from clusterdiag.reports.model.node import NodeReport
from clusterdiag.reports.render.table import render_table


def _line(profile: dict[str, Any]) -> str:
    report = NodeReport(node="n1", profile=profile, version="0", started_at="", duration_s=0.0,
                        level="quick", mode="run", findings=[])
    return render_table(report).splitlines()[1]


def test_the_profiles_passed_over_are_named() -> None:
    line = _line({"name": "site", "auto_detected": True,
                  "matched": ["site", "dgx-h100"]})
    assert line.startswith("  profile site (auto-detected over dgx-h100) · ")


def test_a_hostile_matched_list_is_bounded_escaped_and_inert() -> None:
    names = ["site", "\x1b[2Jwipe", 7, *(f"p{i}" for i in range(500))]
    line = _line({"name": "site", "auto_detected": True, "matched": names})
    assert "\x1b" not in line
    assert "(auto-detected over \\x1b[2Jwipe, p0, p1 (+498 more))" in line
    assert _line({"name": "site", "auto_detected": True, "matched": "dgx-h100"}).startswith(
        "  profile site (auto-detected) · ")
