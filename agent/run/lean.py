"""A few checks judged on a snapshot of only the sources they need, under a profile
already known: the prolog's re-run of what the agent could not judge (nccl.acs for lack
of privilege, gpu.processes for the job). Unlike ``runner.run_node`` it imports only the
families of those checks and the collectors of their sources: no profile detection, no
report model, no other collector, since the prolog pays its imports on every node for
every job. It judges through ``judging``, as the runner does, so a finding reads the
same on either path."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...checks.core import index
from ...checks.core.finding import Finding
from ...checks.core.levels import Level, Mode
from ...checks.core.params import ParamsError
from ...checks.core.registry import CheckContext, History
from ...checks.profiles.profile import load_profile
from .collect import SOURCES, collect_snapshot
from .judging import bound_params, judge

if TYPE_CHECKING:
    from ..read.sources import SourceEnv
    from ..settings.config import Config


def suits(entries: list[index.Entry], level: str) -> bool:
    """Whether the lean path judges these as the runner would: one sample is enough (no
    rate check, no active test) and none needs detection's sources."""
    return level == Level.QUICK and not any(e.rate or e.active for e in entries)


def run_checks(env: SourceEnv, config: Config, checks: list[str], profile_name: str,
               mode: str, budget_s: float) -> list[Finding]:
    """Judge ``checks`` (ids) at the ``quick`` level in ``mode`` under the profile named
    ``profile_name`` (UnknownProfileError when there is none), collecting their sources
    within ``budget_s``."""
    profile = load_profile(profile_name)
    deadline = time.monotonic() + budget_s
    entries, findings = index.plan(checks, config.disabled(), Level.QUICK, mode)
    specs = index.specs(entries)
    env.params = {s.id: config.check_params(s.id, s.params) for s in specs}
    names = {n for s in specs for n in s.needs} & set(SOURCES)
    env.pci_topology_only = all(s.id in index.PCI_TOPOLOGY_ONLY for s in specs if "pci" in s.needs)
    snap = collect_snapshot(env, names, deadline, Level.QUICK)
    for spec in specs:
        try:
            params = bound_params(spec, config, profile)
        except ParamsError as exc:  # set by code, not by a file (which was validated)
            findings.append(Finding.error("node", f"parameters not usable: {exc}").replace(
                check=spec.id))
            continue
        ctx = CheckContext(snapshot=snap, profile=profile, level=Level.QUICK, mode=Mode(mode),
                           now=time.time(), previous=None, profile_source="config",
                           profile_reason="set by configuration", history=History(),
                           params=params)
        findings.extend(judge(spec, ctx))
    return findings
