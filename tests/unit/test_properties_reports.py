"""Property-based tests for node reports received from other nodes (gather and merge).

One answer among healthy ones is garbage: random JSON, a real report with a key removed
or a value replaced by anything, another schema version, enormous strings. The property:
the cluster report is built and rendered; the garbage is either read as a node report or
becomes a cluster.reachability fail naming the node (gather) or the file (merge); and
every other node's results are exactly what they are without the garbage.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.reports.cluster_checks import ClusterSettings, Unreachable, judge
from clusterdiag.reports.fleet.gather import parse_answer
from clusterdiag.reports.fleet.merge import merge_files
from clusterdiag.reports.model.summary import NodeSummary
from clusterdiag.reports.render.html import render_html
from clusterdiag.reports.render.md import render_md
from clusterdiag.reports.render.terminal import render_terminal

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
GOOD = [f"g{i}" for i in range(1, 6)]  # five: enough for cluster.outliers to compare
BAD = "bad1"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    env = env_for(NodeSpec("g1", "dgx-h100"))
    report = run_node(env, Config(), RunOptions(profile="dgx-h100", budget_s=20))
    data: dict[str, Any] = json.loads(json.dumps(report.to_dict()))
    return data


def _as(template: dict[str, Any], node: str) -> dict[str, Any]:
    data = copy.deepcopy(template)
    data["node"] = node
    return data


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=12), st.sampled_from(["fail", "pass", "gb200-nvl72", "gpu0"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
huge = st.integers(min_value=1 << 16, max_value=1 << 21).map(lambda n: "\u00e9x" * n)
# Where a foreign report goes wrong: the places summaries and cluster checks read.
PATHS = [("schema",), ("node",), ("profile",), ("profile", "name"), ("version",),
         ("verdict",), ("inventory",), ("findings",), ("findings", 0), ("findings", 0, "status"),
         ("findings", 0, "message"), ("findings", 0, "action"), ("findings", 0, "component"),
         ("inventory", "gpus"), ("inventory", "gpus", 0), ("inventory", "gpus", 0, "vbios"),
         ("inventory", "hcas"), ("inventory", "hcas", 0, "firmware"), ("inventory", "driver"),
         ("inventory", "kernel"), ("inventory", "fabric"), ("inventory", "fabric", 0),
         ("inventory", "fabric", 0, "clique_id"), ("inventory", "fabric", 0, "state"),
         ("inventory", "rails"), ("inventory", "rails", 0), ("inventory", "rails", 0, "gpu"),
         ("inventory", "rails", 0, "subnet"), ("inventory", "rails", 0, "rate_gbps"),
         ("inventory", "telemetry"), ("inventory", "telemetry", "gpu_temperature_c")]
TRAY_FABRIC = [{"gpu": 0, "state": 3, "status": 0, "clique_id": 1,
                "cluster_uuid": "5f1b4c1e-0000-4000-8000-000000000001"}]


def _edit(data: Any, path: tuple[Any, ...], value: Any, delete: bool) -> None:
    for step in path[:-1]:
        if not isinstance(data, (dict, list)) or (isinstance(data, list) and not data):
            return
        data = data[step] if isinstance(data, dict) and step in data else (
            data[0] if isinstance(data, list) else None)
        if data is None:
            return
    last = path[-1]
    if isinstance(data, dict):
        if delete:
            data.pop(last, None)
        else:
            data[last] = value
    elif isinstance(data, list) and data:
        if delete:
            data.pop(0)
        else:
            data[0] = value


@st.composite
def foreign(draw: st.DrawFn, template: dict[str, Any]) -> Any:
    """Garbage that claims to be node bad1's report."""
    kind = draw(st.sampled_from(["random", "edit", "edit", "edit", "version", "huge"]))
    if kind == "random":
        return draw(json_values)
    data = _as(template, BAD)
    if draw(st.booleans()):  # look like an NVL72 tray, so the rack checks read it too
        data["profile"]["name"] = "gb200-nvl72"
        data["inventory"]["fabric"] = copy.deepcopy(TRAY_FABRIC)
    if kind == "version":
        data["schema"] = draw(st.sampled_from(["clusterdiag/node-report/v2",
                                               "clusterdiag/node-report/v0", "v1", ""]))
    elif kind == "huge":
        _edit(data, draw(st.sampled_from(PATHS)), draw(huge), delete=False)
    else:
        for _ in range(draw(st.integers(1, 3))):
            _edit(data, draw(st.sampled_from(PATHS)), draw(json_values), draw(st.booleans()))
    return data


def _nodes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in report["nodes"]}


def _check_cluster(summaries: list[NodeSummary], failures: list[Unreachable],
                   baseline: dict[str, Any], blame: Callable[[dict[str, Any]], bool]) -> None:
    report = judge(summaries, failures, ClusterSettings(), via="test")
    data = report.to_dict()
    json.dumps(data)
    render_terminal(report, colour=False)
    render_md(report)
    render_html(report)
    nodes = _nodes(data)
    for name in GOOD:
        assert nodes[name] == _nodes(baseline)[name], name
    if not any(s.node not in GOOD for s in summaries):  # the garbage was not read
        reach = [f for f in data["cluster_findings"] if f["check"] == "cluster.reachability"]
        assert any(f["status"] == "fail" and blame(f) for f in reach), reach


@pytest.fixture(scope="module")
def baseline(template: dict[str, Any]) -> dict[str, Any]:
    """The cluster report of the good nodes alone: the same for every example, so judged
    once, not once per example."""
    summaries = [parse_answer(n, json.dumps(_as(template, n))) for n in GOOD]
    assert all(isinstance(s, NodeSummary) for s in summaries)
    return judge(summaries, [], ClusterSettings(), via="test").to_dict()  # type: ignore[arg-type]


@SETTINGS
@given(data=st.data())
def test_gathered_garbage_is_one_unreachable_node(template: dict[str, Any],
                                                  baseline: dict[str, Any],
                                                  data: st.DataObject) -> None:
    answer = data.draw(foreign(template))
    raw = json.dumps(answer).encode() if data.draw(st.booleans()) else \
        data.draw(st.binary(max_size=60))
    results = [parse_answer(n, json.dumps(_as(template, n))) for n in GOOD]
    results.append(parse_answer(BAD, raw))
    summaries = [r for r in results if isinstance(r, NodeSummary)]
    failures = [r for r in results if isinstance(r, Unreachable)]
    _check_cluster(summaries, failures, baseline,
                   lambda f: BAD in f["nodes"])


@SETTINGS
@given(data=st.data())
def test_merged_garbage_file_is_named(template: dict[str, Any], baseline: dict[str, Any],
                                      data: st.DataObject, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data.draw(foreign(template))))
    paths = [str(bad)]
    for name in GOOD:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_as(template, name)))
        paths.append(str(path))
    summaries, failures = merge_files(paths, workers=1)
    # Read as a report, the garbage speaks for the node it names: one more node at most.
    assert len([s for s in summaries if s.node not in GOOD]) <= 1
    _check_cluster(summaries, failures, baseline,
                   lambda f: str(bad) in f["observed"].get("files", ()))


def test_deeply_nested_json_is_unreachable_not_a_crash(tmp_path: Path) -> None:
    """json.loads raises RecursionError, not ValueError, for deep nesting."""
    deep = "[" * 100_000 + "]" * 100_000
    result = parse_answer(BAD, deep)
    assert isinstance(result, Unreachable)
    path = tmp_path / "deep.json"
    path.write_text(deep)
    summaries, failures = merge_files([str(path)], workers=1)
    assert not summaries
    assert failures[0].file == str(path)
