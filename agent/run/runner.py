"""One node run: select checks, collect what they need once, judge, report.

The runner owns everything the checks must not: levels, budgets, sampling twice for
rates, profile resolution, and turning a check that raised into an ``error`` finding.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ...checks.core import index
from ...checks.core.finding import Finding, Status
from ...checks.core.levels import Level, Mode
from ...checks.core.params import ParamsError
from ...checks.core.rails import HcaCountParams, assign
from ...checks.core.registry import CheckContext, CheckSpec, History
from ...checks.profiles.detect import detect_profile
from ...checks.profiles.profile import Profile, load_profile
from ...reports.model.node import NodeReport, inventory, iso
from ..model import Snapshot
from ..model.record import record
from ..model.version import VERSION
from ..read.sources import SourceEnv
from ..settings.config import Config
from .collect import SOURCES, collect_snapshot
from .judging import bound_params, judge


@record
class RunOptions:
    """How one run judges the node: what the flags and the config chose."""
    level: Level = Level.QUICK
    mode: Mode = Mode.RUN
    patterns: tuple[str, ...] = ()
    budget_s: float = 10.0
    profile: str = "auto"
    full_interval_s: float = 3.0


def plan(config: Config, options: RunOptions) -> tuple[list[CheckSpec], list[Finding]]:
    """The checks to run, and the skip findings for those selected but not run; only the
    families of the checks that run are imported (checks/core/index.py)."""
    entries, skipped = index.plan(options.patterns, config.disabled(), options.level,
                                  options.mode)
    return index.specs(entries), skipped


def resolve_profile(name: str, snap: Snapshot) -> tuple[Profile, str, str, tuple[str, ...]]:
    """The profile that judges the node; how it was chosen (``config``, ``detected``,
    ``tied`` where equally specific profiles matched and the base they share judges,
    ``ambiguous`` where none could be told: host.profile warns for both); why; and every
    profile detection matched, the chosen first (checks/profiles/detect.py)."""
    if name != "auto":
        return load_profile(name), "config", "set by configuration", ()
    found = detect_profile(snap)
    source = ("tied" if len(found.tied) > 1 else "ambiguous" if not found.confident
              else "detected")
    return load_profile(found.name), source, found.reason, found.matched


def sources_for(specs: Iterable[CheckSpec], profile: str) -> set[str]:
    names = {n for spec in specs for n in spec.needs}
    if profile == "auto":  # detection's evidence (checks/profiles/detect.py): the B200's NVSwitch
        names |= {"pci", "nvml", "host", "infiniband"}  # managers are RDMA devices
    return names & set(SOURCES)


def collector_params(config: Config, specs: Iterable[CheckSpec]) -> dict[str, Any]:
    """What the collectors read to know what to look at (paths, units): the same
    parameters the checks get, by check id."""
    return {spec.id: config.check_params(spec.id, spec.params) for spec in specs}


def run_node(env: SourceEnv, config: Config, options: RunOptions) -> NodeReport:
    """Collect what the selected checks need (twice for rates at full), then judge."""
    started = time.time()
    deadline = time.monotonic() + options.budget_s
    specs, _ = plan(config, options)
    env.params = collector_params(config, specs)
    names = sources_for(specs, options.profile)
    previous: Snapshot | None = None
    if options.level == Level.FULL and any(s.rate for s in specs):
        sampled = {n for n in names if SOURCES[n].counters}
        previous = collect_snapshot(env, sampled, deadline, options.level)
        time.sleep(max(0.0, min(options.full_interval_s, deadline - time.monotonic() - 1.0)))
    snap = collect_snapshot(env, names, deadline, options.level)
    return evaluate(snap, config, options, previous=previous, started=started)


def assign_roles(snap: Snapshot, config: Config, profile: Profile) -> None:
    """Every RDMA device's role for judging under ``profile`` (checks/core/rails.py), with
    the config's compute/storage/management lists."""
    if snap.infiniband is None:
        return

    (spec,) = index.specs([index.ENTRIES["ib.hca_count"]])
    try:
        params = bound_params(spec, config, profile)
    except ParamsError:  # ib.hca_count reports it; roles then follow the profile alone
        params = HcaCountParams()
    assign(snap, profile, params if isinstance(params, HcaCountParams) else None)


def evaluate(snap: Snapshot, config: Config, options: RunOptions,
             previous: Snapshot | None = None, started: float | None = None,
             history: History | None = None, now: float | None = None) -> NodeReport:
    """Judge a snapshot: the same path for a live run and a saved snapshot re-read offline.

    ``history`` is what the agent remembers across cycles (its counter window) for checks
    that read ``ctx.history``; a one-shot run has none. ``now`` is the time the checks
    judge windows from (the kernel log's last hour): a saved snapshot is judged as of
    when it was taken, not as of today."""
    started = time.time() if started is None else started
    specs, findings = plan(config, options)
    profile, source, reason, matched = resolve_profile(options.profile, snap)
    assign_roles(snap, config, profile)
    for spec in specs:
        try:
            params = bound_params(spec, config, profile)
        except ParamsError as exc:  # set by code, not by a file (which was validated)
            findings.append(Finding.error("node", f"parameters not usable: {exc}").replace(
                check=spec.id))
            continue
        ctx = CheckContext(
            snapshot=snap, profile=profile, level=options.level, mode=options.mode,
            now=time.time() if now is None else now, previous=previous,
            profile_source=source, profile_reason=reason,
            history=history or History(), params=params,
        )
        findings.extend(judge(spec, ctx))
    order = {s: i for i, s in enumerate((Status.FAIL, Status.ERROR, Status.WARN, Status.PASS,
                                         Status.SKIP))}
    findings.sort(key=lambda f: (order[f.status], f.check, f.component))
    return NodeReport(
        node=snap.node,
        profile={"name": profile.name, "auto_detected": source != "config", "reason": reason,
                 "provisional": profile.provisional,
                 **({"matched": list(matched)} if len(matched) > 1 else {})},
        version=VERSION, started_at=iso(started),
        duration_s=round(max(0.0, time.time() - started), 3), level=options.level,
        mode=options.mode,
        findings=findings, inventory=inventory(snap),
        sources={k: {"status": v.status, "calls": v.calls, "seconds": v.seconds,
                     "files_read": v.files_read, "error": v.error}
                 for k, v in snap.sources.items()},
        simulated=snap.simulated,
    )
