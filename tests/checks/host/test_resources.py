"""host.cpu_count and host.memory (checks/host/resources.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.host import EdacController, HostInfo
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.host.factory import judge, one, statuses

# --- cpu_count ------------------------------------------------------------------------

def test_cpu_count_skips_without_minimum() -> None:
    assert one(judge("host.cpu_count", HostInfo("n1", cpu_count=8))).status is Status.SKIP


@pytest.mark.parametrize(("count", "status"), [(224, Status.PASS), (112, Status.FAIL)])
def test_cpu_count_against_minimum(count: int, status: Status) -> None:
    finding = one(judge("host.cpu_count", HostInfo("n1", cpu_count=count), min=224))
    assert (finding.status, finding.observed) == (status, count)


def test_cpu_count_unreadable_is_error_with_reason() -> None:
    info = HostInfo("n1", unknown={"cpu_count": "/proc/stat: missing"})
    finding = one(judge("host.cpu_count", info, min=8))
    assert finding.status is Status.ERROR
    assert finding.observed == "/proc/stat: missing"


# --- memory -----------------------------------------------------------------------------

def test_memory_size_below_minimum_fails() -> None:
    findings = judge("host.memory", HostInfo("n1", memory_total_bytes=1000 * (1 << 30)),
                     min_gib=1900)
    assert statuses(findings) == [Status.FAIL, Status.SKIP]  # no EDAC controllers
    assert findings[0].observed == 1000.0


def test_memory_size_pass_and_edac_pass() -> None:
    info = HostInfo("n1", memory_total_bytes=2000 * (1 << 30),
                    edac=[EdacController("mc0", 3, 0), EdacController("mc1", 0, 0)])
    assert statuses(judge("host.memory", info, min_gib=1900)) == [Status.PASS] * 3


def test_memory_edac_uncorrected_fails_corrected_warns() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", 0, 1), EdacController("mc1", 101, 0),
                                EdacController("mc2", 100, 0)])
    findings = {f.component: f for f in judge("host.memory", info)}
    assert findings["node"].status is Status.SKIP  # no minimum size configured
    assert (findings["mc0"].status, findings["mc0"].action) == (Status.FAIL, Action.INVESTIGATE)
    assert findings["mc1"].status is Status.WARN
    assert findings["mc2"].status is Status.PASS


def test_memory_edac_thresholds_are_params() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", 5, 2)])
    findings = judge("host.memory", info, edac_uncorrected_max=2, edac_corrected_warn=4)
    assert statuses(findings) == [Status.SKIP, Status.WARN]


def test_memory_garbage_edac_count_is_error() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", None, 0)],
                    unknown={"edac.mc0.ce_count": "garbage 'abc'", "edac.mc10.ce_count": "x"})
    finding = judge("host.memory", info)[-1]
    assert finding.status is Status.ERROR
    assert finding.observed == {"edac.mc0.ce_count": "garbage 'abc'"}
