"""Each fault class declares its way back beside its check (checks/core/validation.py),
and ``checks explain`` shows it with its source."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterdiag import checks
from clusterdiag.agent.cli import cli
from clusterdiag.agent.health.incident import validation_for
from clusterdiag.checks.catalogs.manifest import ACTIVE
from clusterdiag.checks.core.validation import HOLD_DOWN_S, Kind

NODE_TESTS = {test for test, declared in ACTIVE.items() if declared["scope"] == "node"}


def test_every_check_that_can_fail_declares_its_validation() -> None:
    for spec in checks.select(None):
        validation = spec.validation
        assert validation is not None, spec.id
        assert validation.family, spec.id
        assert validation.source, spec.id
        if validation.kind is Kind.QUALIFY:
            assert validation.tests, spec.id
            assert set(validation.tests) <= NODE_TESTS, spec.id
        else:
            assert (validation.tests, validation.hold_down_s > 0) == ((), True), spec.id


@pytest.mark.parametrize(("check_id", "family", "tests"), [
    ("nvlink.error_rate", "nvlink", ("allreduce", "d2d")),
    ("nvlink.links_up", "nvlink", ("allreduce", "d2d")),
    ("nvswitch.sxid", "nvswitch", ("allreduce", "d2d")),
    ("ib.error_rate", "ib_port", ("nic",)),
    ("gpu.xid", "xid_reset", ("gpu_compute", "hbm")),
    ("gpu.clock_events", "thermal_power", ("gpu_compute",)),
    ("qualify.gpu_compute", "qualify.gpu_compute", ("gpu_compute",)),
    ("qualify.nic", "qualify.nic", ("nic",)),
])
def test_faults_state_cannot_rule_out_are_validated_by_qualify(
        check_id: str, family: str, tests: tuple[str, ...]) -> None:
    validation = validation_for(check_id)
    assert (validation.kind, validation.family, validation.tests) == (
        Kind.QUALIFY, family, tests)


@pytest.mark.parametrize("check_id", ["host.services", "fabric.manager", "ib.port_state",
                                      "gpu.persistence_mode", "qualify.pairs"])
def test_state_and_configuration_faults_are_rechecked_after_the_hold_down(
        check_id: str) -> None:
    validation = validation_for(check_id)
    assert (validation.kind, validation.family, validation.hold_down_s) == (
        Kind.RECHECK, check_id, HOLD_DOWN_S)


def test_checks_explain_shows_the_validation_and_its_source() -> None:
    out = CliRunner().invoke(cli, ["checks", "explain", "ib.error_rate"]).output
    assert "return to service: qualify: qualify's node tests nic pass" in out
    assert "link_downed" in out
    out = CliRunner().invoke(cli, ["checks", "explain", "host.services"]).output
    assert "return to service: recheck: the check passes again 600 s after" in out
    out = CliRunner().invoke(cli, ["checks", "explain", "qualify.hbm"]).output
    assert "return to service: qualify: qualify's node tests hbm pass" in out
