"""``gpu.xid`` over every code of NVIDIA's Xid Catalog: one line, and three lines from three
jobs, judged as the catalog's immediate action says.

The expectations are written from NVIDIA's buckets, not from the check's own rule table:
a code whose immediate action is a reset, a reboot or a mechanical check fails on one
line with the matching action; the bucketless codes fatal to the GPU fail too; every
other code never fails on one line, and only the restart-the-app codes warn when three
jobs hit them.
"""

from __future__ import annotations

import pytest

from clusterdiag.checks.catalogs.xid_catalog import XID_CATALOG
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.checks.gpu.factory import bad, xid_line, xid_run
from tests.unit.test_xid_catalog import FAILING

RECOVERY_RESET = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
APP_BUCKETS = ("RESTART_APP", "CHECK_UVM")  # counted per job; 45's workflow is informational
QUIET_BUCKETS = ("IGNORE", "WORKFLOW_XID_45", "")  # informational: nothing to do


def _message(code: int) -> str:
    return RECOVERY_RESET if code == 154 else "Unspecified error."


def _verdict(findings: list[Finding]) -> list[tuple[Status, Action]]:
    return [(f.status, f.action) for f in bad(findings)]


@pytest.mark.parametrize("code", sorted(XID_CATALOG))
def test_one_line(code: int) -> None:
    info = XID_CATALOG[code]
    got = _verdict(xid_run(xid_line(code, 0, message=_message(code))))
    if code in FAILING:
        assert got == [(Status.FAIL, Action(FAILING[code]))]
    elif code == 154:  # judged by the recovery action the line reports
        assert got == [(Status.FAIL, Action.RESET_GPU)]
    elif info.immediate in (*APP_BUCKETS, *QUIET_BUCKETS, "WORKFLOW_NVLINK5_ERR"):
        assert got == []
    else:  # CONTACT_SUPPORT (mostly codes NVIDIA marks unused), UPDATE_SWFW: seen, not acted on
        assert [status for status, _ in got] == [Status.WARN]


@pytest.mark.parametrize("code", sorted(XID_CATALOG))
def test_three_lines_from_three_jobs(code: int) -> None:
    info = XID_CATALOG[code]
    jobs = [xid_line(code, 0, age=100 + 900 * i, pid=1000 + i, message=_message(code))
            for i in range(3)]
    got = _verdict(xid_run(*jobs))
    if code in FAILING or code == 154:
        assert [status for status, _ in got] == [Status.FAIL]
    elif info.immediate in APP_BUCKETS:
        assert got == [(Status.WARN, Action.INVESTIGATE)]
    elif info.immediate in QUIET_BUCKETS:
        assert got == []
    else:  # repeats of a code that never fails on one line may warn, never fail
        assert [status for status, _ in got] == [Status.WARN]


def test_the_table_covers_what_the_issue_names() -> None:
    """46 and 158 were missing, 54/109/151/155/156 only warned: now each fails."""
    for code in (46, 158, 54, 109, 151, 155, 156):
        assert code in FAILING
    assert FAILING[54] == "reseat_cable"
