"""A healthy simulated node's Snapshot per platform, for tests that judge one.

``healthy_snapshot(profile)`` builds the simulated node of that platform with no fault
(agent/sim/node.py ``env_for``: its tree written once into a temp root, the ``SimNvml``
stand-in, the simulated commands) and collects it through the real collectors
(agent/run/collect.py), the sources every check of a full run needs, as ``clusterdiag run
--simulate`` does. ``healthy_samples`` gives the two samples the rate checks compare,
taken as a full run takes them. Each profile is collected once per test session; every
caller gets its own copy, since judging assigns RDMA roles in place.

A baseboard profile with no layout of its own (hgx-h100-8gpu) is built as the chassis
the simulator lays out on it (agent/sim/state/platforms.py ``simulated_as``) and judged
as itself.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from functools import cache

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, collector_params, plan, sources_for
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.platforms import simulated_as
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.profiles.profile import builtin_names, load_profile

# Between the two samples, as the fault matrix's full runs take them; each collection
# gets the budget a run gives it.
SAMPLE_INTERVAL_S = 1.2
BUDGET_S = 20.0


@dataclass(frozen=True)
class HealthySamples:
    previous: Snapshot  # what the rate checks compare ``latest`` with
    latest: Snapshot


def simulated_profiles() -> list[str]:
    """The built-in profiles the simulator can build a node of."""
    return [name for name in builtin_names() if simulated_as(name) is not None]


def healthy_snapshot(profile: str) -> Snapshot:
    """A healthy node of ``profile``, as the collectors read it (the later sample)."""
    return healthy_samples(profile).latest


def healthy_samples(profile: str) -> HealthySamples:
    """Two samples of a healthy node of ``profile``, ``SAMPLE_INTERVAL_S`` apart."""
    return copy.deepcopy(_collected(profile))


@cache
def _collected(profile: str) -> HealthySamples:
    platform = simulated_as(profile)
    if platform is None:
        raise ValueError(f"{profile}: the simulator lays out no node of it "
                         "(agent/sim/state/layout.py LAYOUTS)")
    rack = "rack1" if load_profile(platform).nvl72 else None
    env = env_for(NodeSpec("n1", platform, rack=rack))
    config = Config()
    specs, _ = plan(config, RunOptions(level=Level.FULL, profile=profile))
    env.params = collector_params(config, specs)
    names = sources_for(specs, profile)
    previous = collect_snapshot(env, names, time.monotonic() + BUDGET_S, Level.FULL)
    time.sleep(SAMPLE_INTERVAL_S)
    latest = collect_snapshot(env, names, time.monotonic() + BUDGET_S, Level.FULL)
    return HealthySamples(previous, latest)
