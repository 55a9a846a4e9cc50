"""Every simulated fault kind trips its check, on its component, with its action — and no
other check; every healthy profile is all pass; the fault table and the catalog agree."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag import checks
from clusterdiag.agent.daemon import boot_records, cycle
from clusterdiag.agent.daemon.counterwindow import CounterWindow
from clusterdiag.agent.daemon.state import Events
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.agent.sim import node as sim_node
from clusterdiag.agent.sim.faults.catalog import FAULTS, FaultKind
from clusterdiag.agent.sim.faults.ib import example_hca
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state import counter as sim_counter
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles import profile as profile_module
from clusterdiag.checks.profiles.profile import add_site_profiles
from clusterdiag.checks.qualify.judge import CATALOG as QUALIFY_CATALOG
from clusterdiag.reports.cluster_checks import CATALOG as CLUSTER_CATALOG
from clusterdiag.reports.model.node import NodeReport

# The families whose failures the simulator must be able to produce.
SIMULATED_FAMILIES = ("gpu.", "nvlink.", "fabric.", "nvswitch.", "ib.", "nccl.", "roce.",
                      "c2c.")
# Checks that only report on the run itself and have nothing to trip.
# Checks that never fail or warn on hardware: the profile chosen, figures without a verdict.
NOT_FAULTS = {"host.profile", "nvlink.fec_history"}
# A RoCE node (fabric: roce) and an OEM server (layout: oem) are judged with the site
# profiles that say so.
SITE_PROFILES = Path(__file__).parent.parent / "fixtures" / "profiles"


@pytest.fixture(scope="module", autouse=True)
def _roce_profile() -> Iterator[None]:
    """The RoCE site profile registered for this module only: a registered site profile
    takes part in detection (it outranks its base), which would change other modules'
    DGX H100 verdicts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profile_module, "_SITE", {})
        add_site_profiles({n: s.profile for n, s in load_site_profiles(SITE_PROFILES).items()})
        yield
    profile_module.profile_names.cache_clear()


def _run(profile: str, faults: list[dict[str, object]], level: str,
         config: Config | None = None, fabric: str = "infiniband",
         layout: str = "reference") -> NodeReport:
    env = env_for(NodeSpec("n1", profile, rack="rack1" if "nvl72" in profile else None,
                           fabric=fabric, layout=layout, faults=faults))
    judged = ("roce-h100" if fabric == "roce" else "oem-h100" if layout == "oem"
              else profile)
    options = RunOptions(level=level, profile=judged, budget_s=20, full_interval_s=1.2)
    return run_node(env, config or Config(), options)


def _agent_run(profile: str, faults: list[dict[str, object]], config: Config,
               monkeypatch: pytest.MonkeyPatch, cycles: int = 13, step_s: float = 60.0
               ) -> NodeReport:
    """The agent's collect-and-judge cycles with its counter window, ``step_s`` apart on
    the simulator's clock (only the simulated hardware's counters see it; every
    collection is otherwise real), the last cycle's report."""
    spec = NodeSpec("n1", profile, rack="rack1" if "nvl72" in profile else None, faults=faults)
    clock = [time.time()]
    monkeypatch.setattr(sim_counter, "now", lambda: clock[0])
    env = env_for(spec)
    options = RunOptions(level="full", profile=profile, budget_s=20, mode="agent")
    window, previous, report = CounterWindow("n1"), None, None
    for _ in range(cycles):
        snap = cycle.collect(env, config, options)
        snap.taken_at = snap.boot_clock_s = clock[0]  # rates read the boot clock
        report = cycle.judge(snap, config, options, previous, Events([]), time.time(), window)
        window.add(snap)
        previous = snap
        clock[0] += step_s
    assert report is not None
    return report


def _agent_start(profile: str, faults: list[dict[str, object]], config: Config) -> NodeReport:
    """The agent's first collection as it starts: the previous boot's journal read and
    its records kept as events (agent/daemon/boot_records.py), then judged."""
    spec = NodeSpec("n1", profile, rack="rack1" if "nvl72" in profile else None, faults=faults)
    env = env_for(spec)
    options = RunOptions(level="full", profile=profile, budget_s=20, mode="agent")
    snap = cycle.collect(env, config, options)
    found = cycle.read_previous_boot(env)
    events = Events(boot_records.events_from(found, snap))
    return cycle.judge(snap, config, options, None, events, time.time(), None, found.read)


def _config_for(kind: FaultKind) -> Config:
    """Default settings plus the check parameters the kind needs to be caught."""
    config = Config()
    config.data["checks"] = {check: dict(params) for check, params in kind.config.items()}
    return config


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
@pytest.mark.parametrize("level", ["quick", "full"])
def test_healthy_profile_is_all_pass(profile: str, level: str) -> None:
    report = _run(profile, [], level)
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert not bad, bad
    assert any(f.status is Status.PASS and f.check.startswith("gpu.") for f in report.findings)


@pytest.mark.parametrize("level", ["quick", "full"])
def test_healthy_oem_server_is_all_pass(level: str) -> None:
    """The OEM HGX H100: its two ConnectX-6 Dx storage ports under GPU0's and
    GPU4's switches are storage, the eight rails compute, and nothing fails or warns."""
    report = _run("dgx-h100", [], level, layout="oem")
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert not bad, bad
    roles = {h["name"]: h["role"] for h in report.inventory["hcas"]}
    assert sorted(n for n, r in roles.items() if r == "compute") == [
        "mlx5_0", "mlx5_10", "mlx5_11", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9"]
    assert (roles["mlx5_7"], roles["mlx5_8"]) == ("storage", "storage")


@pytest.mark.parametrize("level", ["quick", "full"])
def test_healthy_roce_node_is_all_pass(level: str) -> None:
    """An HGX H100 whose compute rails are RoCE, judged with the site profile that says
    so: every RoCE check judges each rail and passes; no InfiniBand-only check fails."""
    report = _run("dgx-h100", [], level, fabric="roce")
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert not bad, bad
    for check in ("roce.mtu", "roce.gid", "roce.ecn", "roce.pfc", "roce.nccl"):
        passed = {f.component for f in report.findings
                  if f.check == check and f.status is Status.PASS}
        assert len(passed) == 8, (check, passed)


def _profile_for(kind: FaultKind) -> str:
    """The first simulated platform that has what the kind needs (agent/sim/state/platforms.py)."""
    return kind.profiles[0]


def _fault(kind: FaultKind, platform: str | None = None) -> dict[str, object]:
    fault: dict[str, object] = {"node": "n1", "kind": kind.kind}
    defaults: dict[str, object] = {"gpu": 3, "link": 7, "version": "550.54.15", "block": "r2",
                                   "function": "nvmlDeviceGetTemperature", "error": 999}
    if "hca" in kind.keys:  # an HCA the kind applies to on its profile, on port 1
        defaults["hca"] = "mlx5_4" if kind.layout == "oem" else example_hca(
            platform or _profile_for(kind), kind.kind)
        if "port" in kind.options:
            fault["port"] = 1
    for key in kind.keys:
        fault[key] = defaults[key]
    return fault


@pytest.mark.parametrize("kind", sorted(k for k, f in FAULTS.items() if f.cluster or f.active),
                         ids=str)
def test_cluster_fault_leaves_the_node_alone_passing(kind: str) -> None:
    """A cluster-level kind is invisible to the node's own checks (the cluster matrix,
    test_cluster_fault_matrix.py, shows the cross-node check catching it); so is an active
    kind (test_qualify_faults.py shows clusterdiag qualify catching it)."""
    spec = FAULTS[kind]
    report = _run(_profile_for(spec), [_fault(spec)], spec.level, _config_for(spec))
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert not bad, f"{kind} tripped node checks: {bad}"


def _node_kinds() -> list[str]:
    return sorted(k for k, f in FAULTS.items() if not f.cluster and not f.active)


def _elsewhere() -> list[tuple[str, str]]:
    """Each node kind on the last platform it applies to, where that is not its first: a
    platform of another family (an A100, a B200, an NVL72 tray, PCIe cards), proof that
    what the kind needs was read right. RoCE and OEM kinds are judged with site profiles of
    the dgx-h100 only (tests/fixtures/profiles), so they stay there."""
    return [(kind, FAULTS[kind].profiles[-1]) for kind in _node_kinds()
            if len(FAULTS[kind].profiles) > 1 and FAULTS[kind].fabric != "roce"
            and FAULTS[kind].layout != "oem"]


@pytest.mark.parametrize("kind", _node_kinds(), ids=str)
def test_fault_trips_its_check_and_nothing_else(kind: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_trips_only_its_check(kind, _profile_for(FAULTS[kind]), monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "platform"), _elsewhere(), ids=str)
def test_fault_trips_its_check_on_another_platform_it_applies_to(
        kind: str, platform: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_trips_only_its_check(kind, platform, monkeypatch)


def _assert_trips_only_its_check(kind: str, platform: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    spec = FAULTS[kind]
    fault = _fault(spec, platform)
    if spec.trend:  # a trickle: only the agent's hour of counters sees it
        report = _agent_run(platform, [fault], _config_for(spec), monkeypatch)
    elif spec.agent_start:  # only the agent's start reads the previous boot's journal
        report = _agent_start(platform, [fault], _config_for(spec))
    else:
        report = _run(platform, [fault], spec.level, _config_for(spec), spec.fabric,
                      spec.layout)
    component = spec.component.format(**fault)
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    if spec.silent:  # a correct reader copes: nothing trips, its check still judges and passes
        assert not bad, f"{kind} tripped: {bad}"
        assert (spec.check, component, Status.PASS) in {
            (f.check, f.component, f.status) for f in report.findings}, report.findings
        return
    hits = [f for f in bad if f.check == spec.check]
    assert hits, f"{kind}: {spec.check} did not trip; non-pass findings: {bad}"
    assert {f.status.value for f in hits} == {spec.status}, hits
    assert component in {f.component for f in hits}, hits
    assert spec.action in {f.action.value for f in hits}, hits
    for also in spec.also:  # the same fault, a second fact another check owns
        also_hits = [f for f in bad if f.check == also]
        assert {(f.status.value, f.component, f.action.value) for f in also_hits} == {
            (spec.status, component, spec.action)}, (kind, also, also_hits)
    others = [f for f in bad if f.check not in (spec.check, *spec.also)]
    assert not others, f"{kind} also tripped: {others}"


@pytest.mark.parametrize("kind", sorted(k for k, f in FAULTS.items() if f.trend), ids=str)
def test_a_trickle_is_invisible_to_one_interval(kind: str) -> None:
    """What makes a trend kind one: a one-shot run, two samples apart, does not fail it."""
    spec = FAULTS[kind]
    report = _run(_profile_for(spec), [_fault(spec)], "full", _config_for(spec))
    assert not [f for f in report.findings if f.status is Status.FAIL], report.findings


@pytest.mark.parametrize("kind", sorted(k for k, f in FAULTS.items() if f.agent_start),
                         ids=str)
def test_the_previous_boot_is_invisible_to_a_run(kind: str) -> None:
    """``run`` (and the prolog) never ask journalctl: a record only the previous boot's
    journal holds trips nothing there."""
    spec = FAULTS[kind]
    report = _run(_profile_for(spec), [_fault(spec)], "full", _config_for(spec))
    assert not [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]


@pytest.mark.parametrize("journal", ["first_boot", "volatile", "missing", "hang"])
def test_a_previous_boot_the_agent_cannot_read_is_a_note(
        journal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No earlier boot, a volatile journal, no journalctl, one that never answers: the
    agent's start report says why on host.cper's pass, and nothing fails."""
    build = sim_node.build

    def with_journal(*args: Any, **kwargs: Any) -> SimNode:
        node = build(*args, **kwargs)
        node.journal = journal
        return node

    monkeypatch.setattr(sim_node, "build", with_journal)
    report = _agent_start("gb200-nvl72", [], Config())
    bad = [f for f in report.findings if f.status not in (Status.PASS, Status.SKIP)]
    assert not bad, bad
    (cper,) = [f for f in report.findings if f.check == "host.cper"]
    assert str(cper.observed["previous_boot"]).startswith("not read: "), cper.observed


def test_every_fault_kind_names_a_registered_check() -> None:
    for kind in FAULTS.values():
        catalog = (CLUSTER_CATALOG if kind.cluster else QUALIFY_CATALOG if kind.active
                   else checks.REGISTRY)
        assert kind.check in catalog, kind


def test_every_check_that_can_fail_has_a_fault_that_trips_it() -> None:
    tripped = {kind.check for kind in FAULTS.values()}
    missing = [spec.id for spec in checks.REGISTRY.values()
               if spec.id.startswith(SIMULATED_FAMILIES) and spec.actions
               and spec.id not in tripped and spec.id not in NOT_FAULTS]
    assert not missing, f"checks no simulated fault trips: {missing}"
