"""The agent writes /metrics itself (agent/daemon/exposition.py): the text must be what
prometheus_client's ``generate_latest`` writes for the same families, byte for byte, on a
simulated DGX H100 collected through the real collectors and on the values and strings
the format escapes."""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

from clusterdiag.agent.daemon.exposition import COUNTER, GAUGE, Family, text
from clusterdiag.agent.daemon.metric_labels import MetricSettings
from clusterdiag.agent.daemon.metrics import AgentView, registry_for
from clusterdiag.agent.run.collect import SOURCES, collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec

VALUES = [0, 1, -1, 7, 0.5, -2.25, 1e-9, 123456.0, 1234567.0, 12345678.9, 1e21, -1e21,
          2**53, math.inf, -math.inf, math.nan, 1 / 3]
# What a label value or a help text may hold: the three characters the format escapes,
# and others it passes as they are.
STRINGS = ['plain', 'back\\slash', 'quote"d', 'line\nfeed', 'tab\there', '\\n literal',
           'é ünicode', '']


def test_a_dgx_h100_scrape_is_prometheus_clients_text() -> None:
    env = env_for(NodeSpec("n7", "dgx-h100"))
    snap = collect_snapshot(env, list(SOURCES), time.monotonic() + 30, "quick")
    report = evaluate(snap, Config(), RunOptions(profile="dgx-h100"))
    view = AgentView(snapshot=snap, report=report, collections=3, nvml_calls=272,
                     last_success=1765000000.25,
                     settings=MetricSettings(hostname="n7.example"),
                     xid_counts=Counter({("0", "79"): 2, ("3", "48"): 1}))
    registry = registry_for(lambda: view)
    ours = registry.text()
    assert ours == generate_latest(registry)  # type: ignore[arg-type]
    assert b"clusterdiag_gpu_ecc_errors_total{" in ours
    assert b"clusterdiag_xid_events_total{" in ours


@pytest.mark.parametrize("value", VALUES)
def test_a_value_is_written_as_go_writes_it(value: float) -> None:
    gauge = Family("v", "v", GAUGE)
    gauge.add_metric([], value)
    theirs = GaugeMetricFamily("v", "v")
    theirs.add_metric([], value)
    assert text([gauge]) == _theirs(theirs)
    assert text([gauge]).split()[-1].decode() == floatToGoString(value)


@pytest.mark.parametrize("string", STRINGS)
def test_label_values_and_help_are_escaped_as_prometheus_client_does(string: str) -> None:
    ours = Family("c", string, COUNTER, ["b", "a"])
    ours.add_metric([string, "x"], 3)
    theirs = CounterMetricFamily("c", string, labels=["b", "a"])
    theirs.add_metric([string, "x"], 3)
    assert text([ours]) == _theirs(theirs)


def _theirs(family: GaugeMetricFamily | CounterMetricFamily) -> bytes:
    class One:
        def collect(self) -> list[GaugeMetricFamily | CounterMetricFamily]:
            return [family]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())  # type: ignore[arg-type]
    return generate_latest(registry)
