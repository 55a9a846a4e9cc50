"""The XID/SXid catalog: coverage of the codes the checks must know, and its invariants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clusterdiag.agent.kernel_log import read_file
from clusterdiag.checks.finding import Action
from clusterdiag.checks.xid_catalog import (
    SXID_CATALOG,
    XID_CATALOG,
    XidInfo,
    sxid_info,
    xid_info,
)

REAL_XID = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "real" / "xid"
needs_real = pytest.mark.skipif(
    not REAL_XID.is_dir(),
    reason=f"real Xid corpus not found at {REAL_XID} (CI checks out shared/ beside the repo)",
)

REQUIRED_XIDS = {13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
                 119, 120, 121, 136, 140, *range(143, 157)}
APPLICATION_XIDS = {13, 31, 43, 45, 63, 68, 92, 94}
# The SXid lines quoted in hardware.md §5.1.
REFERENCE_SXIDS = {20009, 12028, 20034}


def test_every_required_xid_is_catalogued() -> None:
    assert REQUIRED_XIDS - XID_CATALOG.keys() == set()
    for code in REQUIRED_XIDS:
        info = xid_info(code)
        assert info is not None
        assert info.code == code


def test_application_set_is_exactly_the_specified_one() -> None:
    assert {code for code, info in XID_CATALOG.items() if info.application} == APPLICATION_XIDS


@pytest.mark.parametrize("catalog", [XID_CATALOG, SXID_CATALOG], ids=["xid", "sxid"])
def test_entries_are_well_formed(catalog: dict[int, XidInfo]) -> None:
    actions = {a.value for a in Action}
    for code, info in catalog.items():
        assert info.code == code
        assert info.severity in ("fail", "warn", "info"), code
        assert info.action in actions, code
        assert info.repeat_threshold >= 1, code
        assert info.name, code
        assert info.name == info.name.upper(), code


def test_application_codes_never_fail_a_node_by_themselves() -> None:
    assert [c for c, i in XID_CATALOG.items() if i.application and i.severity == "fail"] == []


@pytest.mark.parametrize(("codes", "severity", "action"), [
    # hardware.md §5.3 rule 1: the GPU is gone or wedged -> drain and reboot.
    ({79, 119}, "fail", "reboot"),
    # rule 2: uncorrectable memory / firmware faults -> drain, reset the GPU, verify.
    ({48, 62, 64, 95, 120, 140, 143}, "fail", "reset_gpu"),
    # rule 3: NVLink on HGX -> drain, reset, check links.
    ({74, 136}, "fail", "reset_gpu"),
])
def test_escalation_rules(codes: set[int], severity: str, action: str) -> None:
    for code in codes:
        info = XID_CATALOG[code]
        assert (info.severity, info.action) == (severity, action), code


def test_nvlink5_codes_leave_the_verdict_to_the_line() -> None:
    # 144-150 carry Fatal/Nonfatal in the line; the table alone must not drain a GB200 tray.
    assert {XID_CATALOG[c].severity for c in range(144, 151)} == {"warn"}
    assert XID_CATALOG[154].severity == "info"


def test_repeated_only_codes_need_more_than_one_occurrence() -> None:
    for code in (13, 31, 32, 43, 68, 69, 109):
        assert XID_CATALOG[code].repeat_threshold > 1, code


def test_unknown_codes_return_none() -> None:
    for code in (0, -1, 9999, 171):
        assert xid_info(code) is None
    assert sxid_info(1) is None
    assert sxid_info(13) is None  # an Xid code is not an SXid


def test_entries_are_frozen() -> None:
    info = XID_CATALOG[79]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.severity = "info"  # type: ignore[misc]


def test_reference_sxids_are_catalogued() -> None:
    assert REFERENCE_SXIDS - SXID_CATALOG.keys() == set()
    info = sxid_info(20034)
    assert info is not None
    assert (info.severity, info.action) == ("fail", "reset_gpu")


@needs_real
def test_every_code_in_the_real_logs_is_catalogued() -> None:
    xids = {e.xid for e in read_file(REAL_XID / "kmsg.txt").xids}
    sxids = {e.sxid for e in read_file(REAL_XID / "sxid_kmsg.txt").sxids}
    assert xids
    assert sxids
    assert {c for c in xids if xid_info(c) is None} == set()
    assert {c for c in sxids if sxid_info(c) is None} == set()
