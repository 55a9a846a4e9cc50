"""One agent collection: the same collect-then-evaluate pipeline as ``clusterdiag run``,
with the agent's memory added — the previous sample for rates, recorded XID events, and
the sticky findings they keep alive."""

from __future__ import annotations

import time

from ...checks.core.registry import History
from ...reports.model.node import NodeReport
from ..collectors import previous_boot as previous_boot_log
from ..model import Snapshot
from ..model.kernel import PreviousBoot
from ..read.sources import SourceEnv
from ..run.collect import collect_snapshot
from ..run.runner import RunOptions, evaluate, plan, sources_for
from ..settings.config import Config
from . import boot_records
from .counterwindow import CounterWindow
from .state import Events
from .sticky import add_sticky, inject


def collect(env: SourceEnv, config: Config, options: RunOptions) -> Snapshot:
    """Read what the selected checks need, under the run budget (blocking: call it from
    a worker thread)."""
    specs, _ = plan(config, options)
    env.params = {spec.id: config.check_params(spec.id, spec.params) for spec in specs}
    deadline = time.monotonic() + options.budget_s
    return collect_snapshot(env, sources_for(specs, options.profile), deadline, options.level)


def read_previous_boot(env: SourceEnv) -> PreviousBoot:
    """The previous boot's hardware error records, read once at the agent's start
    (blocking: call it from a worker thread)."""
    return previous_boot_log.read(env.runner, env.root, time.time())


def judge(snap: Snapshot, config: Config, options: RunOptions, previous: Snapshot | None,
          events: Events, started: float, window: CounterWindow | None = None,
          previous_boot: str | None = None) -> NodeReport:
    """Evaluate with the previous sample (rate checks report the window they judged:
    the time between the two samples), the active events, the previous boot's records
    with what its read said (``previous_boot``, None before or without one) and the
    hour of event counters (checks/core/window.py); then add sticky findings."""
    if previous is not None and previous.node != snap.node:
        previous = None
    inject(snap, events)
    boot_records.inject(snap, events, previous_boot)
    history = window.history(snap.taken_at) if window is not None else History()
    report = evaluate(snap, config, options, previous=previous, started=started, history=history)
    add_sticky(report, events)
    report.duration_s = round(max(0.0, time.time() - started), 3)
    return report
