"""The runner: deadlines per source, one collection per source, errors as findings."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest

from clusterdiag.agent.model import SOURCE_FIELDS, Snapshot
from clusterdiag.agent.run import collect
from clusterdiag.agent.run.collect import SourceSpec
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core import index, registry
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.registry import (
    CheckContext,
    DuplicateCheckError,
    UnknownNeedError,
    check,
)


def test_a_source_that_blocks_forever_becomes_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    never = threading.Event()
    calls: list[str] = []

    def blocking(env: object, stats: object, deadline: float) -> None:
        calls.append("host")
        never.wait()

    monkeypatch.setitem(collect.SOURCES, "host", SourceSpec("host", blocking, 1.0, True))
    env = env_for(NodeSpec("n1", "dgx-h100"))
    # The source's 1 s deadline ends it, not the run's budget: a budget far beyond the
    # bound, so a loaded machine's slack fits between the two
    started = time.monotonic()
    report = run_node(env, Config(), RunOptions(profile="dgx-h100", budget_s=60,
                                                patterns=("host.*", "gpu.count")))
    assert time.monotonic() - started < 20.0
    assert calls == ["host"], "collected once however many checks read it"
    disk = [f for f in report.findings if f.check == "host.disk"]
    assert [f.status for f in disk] == [Status.ERROR]
    assert "no answer within 1 s" in disk[0].message
    assert report.sources["host"]["status"] == "timeout"
    count = [f for f in report.findings if f.check == "gpu.count"]
    assert [f.status for f in count] == [Status.PASS]


def test_a_check_that_raises_is_an_error_and_the_run_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))

    @check("host.zz_broken", needs=("host",), remedy="none")
    def broken(ctx: CheckContext) -> Iterator[Finding]:
        raise KeyError("boom")
        yield  # pragma: no cover

    env = env_for(NodeSpec("n1", "dgx-h100"))
    report = run_node(env, Config(), RunOptions(profile="dgx-h100",
                                                patterns=("host.zz_broken", "host.disk")))
    broken_findings = [f for f in report.findings if f.check == "host.zz_broken"]
    assert [f.status for f in broken_findings] == [Status.ERROR]
    assert "KeyError" in broken_findings[0].message
    assert any(f.check == "host.disk" and f.status is Status.PASS for f in report.findings)


def test_duplicate_check_id_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    with pytest.raises(DuplicateCheckError):
        check("host.disk", needs=(), remedy="")(lambda ctx: iter(()))


def test_a_need_that_is_not_a_snapshot_source_is_refused_at_registration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    with pytest.raises(UnknownNeedError, match="'infiniband_ports'"):
        check("ib.zz_typo", needs=("infiniband_ports",), remedy="")
    assert "ib.zz_typo" not in registry.REGISTRY
    check("ib.zz_fine", needs=("infiniband",), remedy="")(lambda ctx: iter(()))
    assert registry.REGISTRY["ib.zz_fine"].needs == ("infiniband",)


def test_the_needs_a_check_may_name_are_the_collected_sources() -> None:
    assert set(collect.SOURCES) == SOURCE_FIELDS
    assert {f.name for f in dataclasses.fields(Snapshot)} >= SOURCE_FIELDS


def test_quick_skips_rate_checks_with_the_reason() -> None:
    env = env_for(NodeSpec("n1", "dgx-h100"))
    report = run_node(env, Config(), RunOptions(profile="dgx-h100",
                                                patterns=("nvlink.error_rate",)))
    (finding,) = report.findings
    assert finding.status is Status.SKIP
    assert "--level full" in finding.message


def test_every_selected_check_yields_a_finding() -> None:
    env = env_for(NodeSpec("n1", "hgx-h100-pcie"))
    report = run_node(env, Config(), RunOptions(profile="hgx-h100-pcie"))
    # the manifest, not the registry: a run imports only the families its plan needs
    assert {f.check for f in report.findings} == set(index.known())
