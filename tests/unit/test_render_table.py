"""The node table's problem rows: wrapped between words at the width, continuation lines
indented, evidence as ``key=value`` pairs rather than a Python repr."""

from __future__ import annotations

from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.reports.model.node import NodeReport
from clusterdiag.reports.render.table import render_table

XID = {"gpu": "gpu5", "xid": 46, "last": "Unspecified error.", "pids": [4242, 4243]}


def _table(width: int) -> list[str]:
    finding = Finding(Status.FAIL, "gpu5", "Xid 46 (GPU_TIMEOUT_ERROR) " + "x" * 100,
                      observed=XID, expected="< 1 occurrences", action=Action.RESET_GPU,
                      check="gpu.xid")
    report = NodeReport(node="n1", profile={"name": "dgx-h100"}, version="0.1.0",
                        started_at="2026-03-14T09:12:44+00:00", duration_s=0.1, level="quick",
                        mode="run", findings=[finding])
    return render_table(report, width=width).splitlines()


def test_a_problem_row_wraps_between_words_at_the_width() -> None:
    rows = _table(80)[4:]
    assert rows[0].startswith("  FAIL  gpu.xid                  gpu5           Xid 46 "
                              "(GPU_TIMEOUT_ERROR) x")
    assert all(len(row) <= 80 for row in rows)
    assert all(row.startswith(" " * 8) and row[8] != " " for row in rows[1:])
    assert rows[1] == " " * 8 + "x" * 72  # one token longer than a line: broken, not overflowing
    assert rows[3] == (" " * 8 + "error.\" pids=4242,4243, expected=< 1 occurrences, "
                       "action=reset_gpu)")
    joined = " ".join(row.strip() for row in rows)
    assert "pids=4242,4243" in joined
    assert "expected=< 1 occurrences" in joined


def test_evidence_is_key_value_pairs_with_spaced_values_quoted() -> None:
    joined = " ".join(row.strip() for row in _table(400)[4:])
    assert "(observed gpu=gpu5 xid=46 last=\"Unspecified error.\" pids=4242,4243, " in joined
    assert "{" not in joined
    assert "'" not in joined
