"""fabric.imex as the site runs IMEX (checks/fabric/imex.py): the profile's imex_mode or
the DRA driver's kubelet plugin decides what a healthy tray shows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.host import ImexDomain, ImexPeer, ImexState
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.profiles.profile import load_profile
from tests.checks.fabric.factory import NOW, make_snapshot, one, statuses
from tests.checks.harness import run_check

IMEX = "nvidia-imex.service"
HOSTS = [f"10.0.0.{i}" for i in range(18)]


def domain(status: str = "UP", missing: tuple[int, ...] = ()) -> ImexDomain:
    return ImexDomain(status, [ImexPeer(i, h, "UNAVAILABLE" if i in missing else "READY")
                               for i, h in enumerate(HOSTS)])


def tray(service: str = "active", *, plugin: bool = False, live: bool | None = None,
         channels: bool = True, nodes: bool = True,
         state: ImexDomain | None = None) -> Snapshot:
    """A tray; ``plugin`` is the DRA plugin's folder, ``live`` its registration socket
    answering (by default, wherever the folder is)."""
    snap = make_snapshot("gb200-nvl72", services={IMEX: service})
    assert snap.host is not None
    snap.host.imex = ImexState(dra_plugin=plugin, dra_live=plugin if live is None else live,
                               nodes_config=HOSTS if nodes else None,
                               channels=["channel0"] if channels else None,
                               domain=state if state is not None else domain())
    return snap


def judge(snap: Snapshot, mode: str = "auto") -> list[Finding]:
    profile = dataclasses.replace(load_profile("gb200-nvl72"), imex_mode=mode)
    return run_check("fabric.imex", snap, profile=profile, now=NOW)


def test_a_host_service_under_the_dra_driver_fails_with_the_remedy() -> None:
    for snap, mode in ((tray(plugin=True), "auto"), (tray(), "dra")):
        finding = one(judge(snap, mode))
        assert (finding.status, finding.action) == (Status.FAIL, Action.FIX_CONFIG)
        assert "stop and disable the host nvidia-imex service; the DRA driver runs IMEX " \
               "per ComputeDomain" in finding.message


def test_a_dra_plugin_folder_without_a_live_plugin_never_fails_a_host_service() -> None:
    """The folder outlives an uninstalled driver: in auto the tray is judged as the host
    runs IMEX, and warns that the mode is ambiguous; an explicit dra still fails."""
    snap = tray(plugin=True, live=False)
    assert snap.host is not None
    assert snap.host.imex is not None
    snap.host.imex.unknown["dra_live"] = "/var/lib/kubelet/plugins_registry/" \
                                         "compute-domain.nvidia.com-reg.sock: missing"
    warned, judged = judge(snap)
    assert (warned.status, warned.action) == (Status.WARN, Action.FIX_CONFIG)
    assert warned.message == ("DRA plugin folder present but no live plugin: the host IMEX "
                              "service may be intended; set imex_mode")
    assert "reg.sock: missing" in str(warned.observed)
    assert (judged.status, judged.message) == (Status.PASS, "IMEX service running, domain UP")
    assert one(judge(snap, "dra")).status is Status.FAIL
    assert one(judge(snap, "host")).status is Status.PASS


@pytest.mark.parametrize("service", ["inactive", "failed", "not-found"])
def test_under_the_dra_driver_no_host_service_is_healthy(service: str) -> None:
    assert one(judge(tray(service, plugin=True, state=domain("DOWN")))).status is Status.PASS


def test_a_dra_driver_with_a_host_managed_daemon_is_judged_as_the_host() -> None:
    """HostManagedIMEXDaemon: the plugin is installed and the host service is right."""
    assert statuses(judge(tray(plugin=True), "host")) == {Status.PASS}


def test_per_job_judges_only_the_channel_device() -> None:
    assert one(judge(tray("inactive", nodes=False, state=domain("DOWN")), "per_job")
               ).status is Status.PASS
    missing = one(judge(tray("inactive", channels=False), "per_job"))
    assert (missing.status, missing.action) == (Status.WARN, Action.FIX_CONFIG)


def test_the_host_mode_reads_the_domain_and_passes_it_up() -> None:
    finding = one(judge(tray(), "host"))
    assert finding.status is Status.PASS
    assert "18 nodes READY" in str(finding.observed)


@pytest.mark.parametrize("status", ["DEGRADED", "DOWN"])
def test_a_missing_tray_is_named_and_only_warns(status: str) -> None:
    finding = one(judge(tray(state=domain(status, missing=(5,)))))
    assert (finding.status, finding.action) == (Status.WARN, Action.INVESTIGATE)
    assert "node #5 10.0.0.5 UNAVAILABLE" in str(finding.observed)
    assert "10.0.0.5" not in finding.message  # the same problem groups across trays


def test_the_nodes_file_channel_and_unreadable_domain_each_warn() -> None:
    snap = tray(nodes=False, channels=False)
    assert snap.host is not None
    assert snap.host.imex is not None
    snap.host.imex.domain = None
    snap.host.imex.unknown["domain"] = "nvidia-imex-ctl: no answer within 30 s"
    found = judge(snap, "host")
    assert [f.status for f in found] == [Status.WARN] * 3
    assert "no answer within 30 s" in str(found[2].observed)


def test_an_unknown_imex_mode_is_an_error_and_a_site_profile_refuses_it(
        tmp_path: Path) -> None:
    assert one(judge(tray(), "sideways")).status is Status.ERROR
    (tmp_path / "site.yaml").write_text("extends: gb200-nvl72\nimex_mode: sideways\n")
    with pytest.raises(ConfigError, match="imex_mode"):
        load_site_profiles(tmp_path)
