"""The XID/SXid catalog: coverage of the codes the checks must know, and its invariants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clusterdiag.agent.collectors.kernel_log import read_file
from clusterdiag.checks.catalogs.xid_catalog import (
    SXID_CATALOG,
    XID_CATALOG,
    XidInfo,
    sxid_info,
    xid_info,
)
from clusterdiag.checks.core.finding import Action

# The hand-checked real corpus (tests/fixtures/real/xid/PROVENANCE.md).
REAL_XID = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "xid"

DATA = Path(__file__).resolve().parents[2] / "checks" / "catalogs" / "xid_catalog.tsv"
# The codes whose immediate action in NVIDIA's catalog is a reset, a reboot or a check of
# the mechanicals, and the bucketless codes fatal to the GPU, with the action
# each must fail with.
FAILING = {
    **dict.fromkeys((46, 62, 64, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158),
                    "reset_gpu"),                                       # RESET_GPU
    48: "reset_gpu", 74: "reset_gpu",          # WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR
    79: "reboot", 151: "reboot",               # RESTART_BM, RESTART_VM
    54: "reseat_cable",                        # CHECK_MECHANICALS
    167: "reboot", 168: "rma", 169: "reset_gpu", 171: "reset_gpu", 172: "reset_gpu",
}
# Real SXid lines from public test fixtures of the nvidia-nvswitch driver's log.
REFERENCE_SXIDS = {20009, 12028, 20034}


def test_the_catalog_is_nvidias_every_code_traced_to_the_data_file() -> None:
    head = [line for line in DATA.read_text().splitlines() if line.startswith("#")]
    text = "\n".join(head)
    assert "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in text
    assert "Read: 20" in text  # the date it was read
    assert sorted(XID_CATALOG) == list(range(1, 173))
    assert all(info.immediate or code > 161 for code, info in XID_CATALOG.items())
    assert XID_CATALOG[54].immediate == "CHECK_MECHANICALS"
    assert XID_CATALOG[74].immediate == "WORKFLOW_NVLINK_ERR"


def test_failing_codes_are_exactly_the_reset_reboot_and_mechanical_ones() -> None:
    failing = {code: info.action for code, info in XID_CATALOG.items()
               if info.severity == "fail"}
    assert failing == FAILING


def test_application_codes_are_nvidias_restart_the_app_ones() -> None:
    app = {code for code, info in XID_CATALOG.items() if info.application}
    assert app == {code for code, info in XID_CATALOG.items()
                   if info.immediate in ("RESTART_APP", "CHECK_UVM", "WORKFLOW_XID_45")}
    assert {13, 31, 32, 45, 68, 69, 94} <= app


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


def test_no_code_that_does_not_fail_carries_a_sticky_action() -> None:
    """The agent keeps reset/reboot/RMA Xids alive until a reset (daemon/sticky.py): a code
    that never fails must not ask for one."""
    assert [c for c, i in XID_CATALOG.items() if i.severity != "fail"
            and i.action in ("reset_gpu", "reboot", "rma")] == []


def test_nvlink5_and_154_leave_the_verdict_to_the_line() -> None:
    assert {XID_CATALOG[c].severity for c in range(144, 151)} == {"warn"}
    assert {XID_CATALOG[c].repeat_threshold for c in range(144, 151)} == {3}
    assert XID_CATALOG[154].severity == "info"


def test_unknown_codes_return_none() -> None:
    for code in (0, -1, 173, 9999):
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


def test_every_code_in_the_real_logs_is_catalogued() -> None:
    xids = {e.xid for e in read_file(REAL_XID / "kmsg.txt").xids}
    sxids = {e.sxid for e in read_file(REAL_XID / "sxid_kmsg.txt").sxids}
    assert xids
    assert sxids
    assert {c for c in xids if xid_info(c) is None} == set()
    assert {c for c in sxids if sxid_info(c) is None} == set()
