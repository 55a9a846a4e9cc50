"""fabric.manager (services.py) and fabric.imex judged on the unit alone (imex.py)."""

from __future__ import annotations

import dataclasses

import pytest

from clusterdiag.agent.model.host import ServiceState
from clusterdiag.agent.run.runner import RunOptions, plan
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.profiles.profile import load_profile
from tests.checks.fabric.factory import judge, make_snapshot, one
from tests.checks.harness import run_check

# --- fabric.manager -------------------------------------------------------------------

FM = "nvidia-fabricmanager.service"


@pytest.mark.parametrize("platform", ["dgx-h100", "dgx-a100"])
def test_manager_passes_when_active_on_nvswitch_boards(platform: str) -> None:
    finding = one(judge("fabric.manager", make_snapshot(platform, services={FM: "active"}),
                        platform))
    assert finding.status is Status.PASS


@pytest.mark.parametrize(("state", "status"), [("failed", Status.FAIL),
                                                ("inactive", Status.FAIL),
                                                ("not-found", Status.FAIL),
                                                ("activating", Status.WARN)])
def test_manager_not_running(state: str, status: Status) -> None:
    finding = one(judge("fabric.manager", make_snapshot("dgx-h100", services={FM: state}),
                        "dgx-h100"))
    assert finding.status is status
    if status is Status.FAIL:
        assert finding.action is Action.FIX_CONFIG


def test_manager_unit_name_is_a_parameter_and_matches_without_suffix() -> None:
    snap = make_snapshot("dgx-h100", services={"nvidia-fabricmanager": "active"})
    assert one(judge("fabric.manager", snap, "dgx-h100")).status is Status.PASS
    snap = make_snapshot("dgx-h100", services={"fm-custom.service": "inactive", FM: "active"})
    assert one(judge("fabric.manager", snap, "dgx-h100", unit="fm-custom.service")).status \
        is Status.FAIL


@pytest.mark.parametrize("platform", ["gb200-nvl72", "hgx-h100-pcie"])
def test_manager_skips_where_there_is_no_fabric_manager(platform: str) -> None:
    # A GB200 tray never runs it: an inactive unit there must not fail.
    snap = make_snapshot(platform, services={FM: "inactive"})
    finding = one(judge("fabric.manager", snap, platform))
    assert finding.status is Status.SKIP
    assert finding.message == "no Fabric Manager on this platform"


def test_manager_skips_on_nvl72_even_if_a_site_profile_says_fabric_manager() -> None:
    profile = dataclasses.replace(load_profile("gb200-nvl72"), fabric_manager=True)
    snap = make_snapshot("gb200-nvl72", services={FM: "failed"})
    assert one(run_check("fabric.manager", snap, profile=profile)).status is Status.SKIP


def test_manager_skips_without_systemd_and_errors_without_state() -> None:
    snap = make_snapshot("dgx-h100", has_systemd=False)
    assert one(judge("fabric.manager", snap, "dgx-h100")).status is Status.SKIP
    assert one(judge("fabric.manager", make_snapshot("dgx-h100"), "dgx-h100")).status \
        is Status.ERROR
    assert one(judge("fabric.manager", make_snapshot("dgx-h100", host=False),
                     "dgx-h100")).status is Status.ERROR


# --- fabric.imex ----------------------------------------------------------------------

IMEX = "nvidia-imex.service"


def test_imex_runs_on_nvl72() -> None:
    snap = make_snapshot("gb200-nvl72", services={IMEX: "active"})
    assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.PASS


@pytest.mark.parametrize("state", ["inactive", "failed", "not-found", "activating"])
def test_imex_only_ever_warns(state: str) -> None:
    snap = make_snapshot("gb200-nvl72", services={IMEX: state})
    finding = one(judge("fabric.imex", snap, "gb200-nvl72"))
    assert finding.status is Status.WARN


def test_imex_never_errors_or_fails_on_missing_evidence() -> None:
    for snap in (make_snapshot("gb200-nvl72"), make_snapshot("gb200-nvl72", host=False),
                 make_snapshot("gb200-nvl72", has_systemd=False)):
        assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.SKIP
    snap = make_snapshot("gb200-nvl72")
    assert snap.host is not None
    snap.host.services = [ServiceState(IMEX, error="systemctl: timeout")]
    assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.WARN


@pytest.mark.parametrize("platform", ["dgx-h100", "hgx-h100-pcie", "dgx-a100"])
def test_imex_says_nothing_where_not_expected(platform: str) -> None:
    snap = make_snapshot(platform, services={IMEX: "inactive"})
    finding = one(judge("fabric.imex", snap, platform))
    assert finding.status is Status.SKIP
    assert "not expected" in finding.message


@pytest.mark.parametrize("mode", ["prolog", "run", "healthcheck"])
def test_imex_is_skipped_in_the_prolog(mode: str) -> None:
    # Through the runner's plan: a per-job IMEX never drains a node in the prolog.
    run, skipped = plan(Config(), RunOptions(mode=mode, patterns=("fabric.*",)))
    ran = {spec.id for spec in run}
    assert {"fabric.manager", "fabric.state", "fabric.clique", "fabric.health_mask"} <= ran
    if mode == "prolog":
        assert "fabric.imex" not in ran
        finding = one([f for f in skipped if f.check == "fabric.imex"])
        assert finding.status is Status.SKIP
    else:
        assert "fabric.imex" in ran
