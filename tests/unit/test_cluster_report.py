"""The cluster report: reading node reports cheaply but safely, merging files (bad ones
become findings), the JSON against its published schema, and the three renderers."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.reports.cluster_checks import ClusterSettings, Unreachable, judge
from clusterdiag.reports.fleet import merge
from clusterdiag.reports.fleet.merge import expand, merge_files, read_report
from clusterdiag.reports.model.cluster import ClusterReport
from clusterdiag.reports.model.summary import BadReport, NodeSummary, summarize
from clusterdiag.reports.render.html import render_html
from clusterdiag.reports.render.md import render_md
from clusterdiag.reports.render.terminal import render_terminal

SCHEMA = Path(__file__).resolve().parents[2] / "reports/schema/cluster-report.v1.json"


@cache
def _report(profile: str, faults: tuple[tuple[str, Any], ...] = ()) -> dict[str, Any]:
    fault_list = [dict(f) for f in faults]
    env = env_for(NodeSpec("n1", profile, faults=fault_list))
    return run_node(env, Config(), RunOptions(profile=profile)).to_dict()


def report(name: str, profile: str = "dgx-h100", **fault: Any) -> dict[str, Any]:
    faults = (tuple(sorted({"node": "n1", **fault}.items())),) if fault else ()
    return dict(copy.deepcopy(_report(profile, faults)), node=name)


def test_summarize_folds_passes_into_counts_and_keeps_problems() -> None:
    data = report("gpu003", kind="nvlink_down", gpu=3, link=7)
    summary = summarize(data)
    assert summary.node == "gpu003"
    assert summary.profile == "dgx-h100"
    assert summary.gpus == 8
    assert summary.verdict is Status.FAIL
    assert summary.counts["pass"] == sum(f["status"] == "pass" for f in data["findings"])
    assert all(f.status is not Status.PASS for f in summary.problems)
    assert any(f.check == "nvlink.links_up" for f in summary.problems)
    assert summary.facts.driver == data["inventory"]["driver"]


@pytest.mark.parametrize(("data", "reason"), [
    ([1, 2], "not a JSON object"),
    ({"node": "x"}, "no schema tag"),
    ({"schema": "clusterdiag/node-report/v2", "node": "x"}, "schema clusterdiag/node-report/v2"),
    ({"schema": "clusterdiag/node-report/v1", "node": "x"}, "lacks required key"),
])
def test_summarize_rejects_with_one_stable_line(data: Any, reason: str) -> None:
    with pytest.raises(BadReport, match=reason):
        summarize(data)


def test_summarize_rejects_malformed_findings() -> None:
    data = report("x")
    data["findings"][0]["status"] = "maybe"
    with pytest.raises(BadReport, match="malformed node report"):
        summarize(data)


def test_summarize_builds_a_finding_for_problems_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node's ~300 findings are nine in ten passes, counted and dropped: building each
    as a Finding was most of ``report merge``'s CPU."""
    data = report("gpu003", kind="nvlink_down", gpu=3, link=7)
    built: list[Any] = []
    real = Finding.from_dict
    monkeypatch.setattr(Finding, "from_dict",
                        classmethod(lambda cls, item: built.append(item) or real(item)))
    summary = summarize(data)
    assert summary.counts["pass"] > 100
    assert summary.problems
    assert len(built) == len(summary.problems)


@pytest.mark.parametrize(("change", "reason"), [
    ({"component": ["gpu0"]}, "component is not a string"),
    ({"message": "x" * 1_001}, "message is longer than 1000"),
    ({"check": "c" * 101}, "check is longer than 100"),
    ({"check": 7}, "check is not a string"),
    ({"action": "format_disk"}, "malformed node report"),
    ({"action": ["none"]}, "malformed node report"),
    ({"status": ["pass"]}, "malformed node report"),
])
def test_a_hostile_pass_refuses_the_whole_report(change: dict[str, Any], reason: str) -> None:
    data = report("gpu001")
    passes = [item for item in data["findings"] if item["status"] == "pass"]
    passes[len(passes) // 2].update(change)
    with pytest.raises(BadReport, match=reason):
        summarize(data)
    data["findings"].insert(5, ["pass"])
    with pytest.raises(BadReport, match="finding that is not an object"):
        summarize(data)


def test_a_pass_is_counted_never_shown() -> None:
    """A pass's text reaches no renderer, so control characters in it are inert."""
    hostile = "\x1b]0;owned\x07\x1b[2J \u202e"
    data = report("gpu001")
    first = next(item for item in data["findings"] if item["status"] == "pass")
    first.update(message=hostile, component=hostile, observed=hostile)
    summary = summarize(data)
    assert summary.counts["pass"] == sum(f["status"] == "pass" for f in data["findings"])
    cluster = judge([summary], [], ClusterSettings(), via="files")
    for text in (render_terminal(cluster, colour=False), render_md(cluster),
                 render_html(cluster), json.dumps(cluster.to_dict())):
        assert "owned" not in text


def test_findings_left_to_their_defaults_fold_the_same() -> None:
    """A finding without ``check`` or ``action`` (their defaults apply) is read one finding
    at a time; the counts and problems are those of the whole report read at once."""
    data = report("gpu003", kind="nvlink_down", gpu=3, link=7)
    whole = summarize(data)
    sparse = copy.deepcopy(data)
    quiet = next(item for item in sparse["findings"] if item["status"] == "pass")
    del quiet["check"], quiet["action"]
    assert (summarize(sparse).counts, summarize(sparse).problems) == (whole.counts,
                                                                     whole.problems)


def test_merge_reads_a_report_without_allocating_the_bound(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A read asks for the file's size, not MAX_BYTES: CPython allocates what is asked."""
    path = tmp_path / "n1.json"
    path.write_text(json.dumps(report("n1")))
    assert merge._read_regular("/proc/self/status").startswith(b"Name:")  # no st_size
    monkeypatch.setattr(merge, "MAX_BYTES", 1 << 62)  # no machine could allocate it
    assert isinstance(read_report(str(path)), NodeSummary)
    monkeypatch.setattr(merge, "MAX_BYTES", 100)
    assert len(merge._read_regular(str(path))) == 101
    refused = read_report(str(path))
    assert isinstance(refused, Unreachable)
    assert "larger than" in refused.reason


def test_merge_goes_on_past_bad_files(tmp_path: Path) -> None:
    for i in range(1, 4):
        (tmp_path / f"gpu{i}.json").write_text(json.dumps(report(f"gpu{i}")))
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "v2.json").write_text(json.dumps(
        {**report("gpu9"), "schema": "clusterdiag/node-report/v2"}))
    summaries, failures = merge_files(expand([str(tmp_path)]))
    assert sorted(s.node for s in summaries) == ["gpu1", "gpu2", "gpu3"]
    reasons = {(f.file and Path(f.file).name, f.node, f.reason.split(" (")[0])
               for f in failures}
    assert ("junk.json", None, "file is not JSON") in reasons
    assert ("other.json", None, "not a clusterdiag node report") in reasons
    assert any(r[0] == "v2.json" and r[1] == "gpu9" for r in reasons)
    assert read_report(str(tmp_path / "missing.json")).reason.startswith("cannot read file")


def test_merge_parallel_path_gives_the_same_result(tmp_path: Path) -> None:
    base = json.dumps(report("n0"))
    for i in range(210):
        (tmp_path / f"n{i:03d}.json").write_text(base.replace('"node": "n0"',
                                                              f'"node": "n{i:03d}"', 1))
    serial = merge_files(expand([str(tmp_path)]), workers=1)
    parallel = merge_files(expand([str(tmp_path)]), workers=2)
    assert sorted(s.node for s in serial[0]) == sorted(s.node for s in parallel[0])
    assert len(parallel[0]) == 210
    assert not parallel[1]


def _cluster() -> ClusterReport:
    nodes = [summarize(report(f"gpu{i:03d}")) for i in range(1, 7)]
    nodes.append(summarize(report("gpu007", kind="nvlink_down", gpu=3, link=7)))
    return judge(nodes, [Unreachable("answer is not JSON", node="gpu008")], ClusterSettings(),
                 via="agent")


def test_cluster_json_matches_its_published_schema() -> None:
    data = _cluster().to_dict()
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(data)
    assert data["bad_nodes"] == "gpu[007-008]"
    assert data["unreachable"] == "gpu008"
    assert data["counts"]["nodes"] == 8
    assert data["counts"]["nodes_ready"] == 6
    assert data["counts"]["gpus_ready"] == 48
    assert not data["ready"]


def test_terminal_verdict_first_then_exclude_then_groups() -> None:
    text = render_terminal(_cluster(), colour=False)
    lines = text.splitlines()
    # The silent node's GPUs are unknown: 7 answering nodes x 8 GPUs.
    assert lines[0] == "NOT READY: 6 of 8 nodes ready, 48 of 56 GPUs"
    assert lines[1] == "exclude (2): gpu[007-008]"
    assert "\x1b[" not in text
    fails = [i for i, line in enumerate(lines) if line.startswith("FAIL")]
    warns = [i for i, line in enumerate(lines) if line.startswith("WARN")]
    assert fails
    assert (not warns or max(fails) < min(warns))
    assert re.search(r"FAIL\s+nvlink.links_up\s+NVLinks down\s+gpu007\s+1\s+reset_gpu", text)
    assert re.search(r"FAIL\s+cluster.reachability\s+answer is not JSON\s+gpu008", text)
    assert not any(line.startswith("PASS") for line in lines)
    assert lines[-1].endswith("(counted per node, not listed)")


def test_markdown_has_exclude_block_and_problem_table() -> None:
    text = render_md(_cluster())
    assert text.startswith("# Cluster report: NOT READY")
    assert "sbatch --exclude=gpu[007-008]" in text
    assert "| FAIL | `nvlink.links_up` | NVLinks down | `gpu007` | 1 | reset_gpu | gpu3 |" in text


def test_html_is_self_contained_and_has_a_cell_per_node() -> None:
    page = render_html(_cluster())
    assert "<h1>NOT READY</h1>" in page
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page)
    assert "<script" not in page
    assert "@import" not in page
    assert "url(" not in page
    assert page.count("<details class='cell") == 8
    assert "v-silent" in page  # the node that gave no report
    assert "NVLinks down" in page


def test_html_escapes_node_text() -> None:
    cluster = _cluster()
    cluster.nodes[0].problems.append(
        cluster.nodes[-2].problems[0].__class__(Status.WARN, "x", "<script>alert(1)</script>",
                                                check="gpu.model"))
    assert "<script>" not in render_html(cluster)


def _tray_report() -> dict[str, Any]:
    return report("tray01", "gb200-nvl72")


def test_summarize_keeps_a_trays_imex_view() -> None:
    view = summarize(_tray_report()).facts.imex
    assert view is not None
    assert (view.status, len(view.peers)) == ("UP", 18)
    assert [p.host for p in view.peers if p.host in view.own] == view.own


@pytest.mark.parametrize(("imex", "reason"), [
    ("UP", "malformed inventory.imex"),
    ({"status": "SIDEWAYS", "peers": [], "own": []}, "status is none of"),
    ({"status": "UP", "peers": [{"index": 0, "host": "<b>x</b>", "host_name": None,
                                 "status": "READY"}], "own": []}, "imex peer"),
    ({"status": "UP", "peers": [{"index": 0, "host": "10.0.0.1", "host_name": None,
                                 "status": "ready; rm"}], "own": []}, "imex peer"),
    ({"status": "UP", "peers": [{"index": True, "host": "10.0.0.1", "host_name": None,
                                 "status": "READY"}], "own": []}, "imex peer"),
    ({"status": "UP", "peers": [{"index": 0, "host": "10.0.0.1", "host_name": None,
                                 "status": "READY"}] * 1025, "own": []}, "more than 1024"),
    ({"status": "UP", "peers": [], "own": [["10.0.0.1"]]}, "own entry"),
])
def test_summarize_refuses_a_hostile_imex_view(imex: Any, reason: str) -> None:
    data = _tray_report()
    data["inventory"]["imex"] = imex
    with pytest.raises(BadReport, match=reason):
        summarize(data)


@pytest.mark.parametrize("change", [{"hca": None}, {"port": "1; rm"}, {"port": None}])
def test_a_rail_without_its_port_is_refused_not_a_crash(change: dict[str, Any]) -> None:
    """cluster.ib_rails looks a rail's ``hca``/``port`` up among the node's failed ib.rate
    ports: a report whose rail lacks them is refused alone, never a KeyError that stops
    the merge of every other node."""
    data = report("gpu002")
    data["inventory"]["rails"][0].update(change)
    with pytest.raises(BadReport, match=r"malformed inventory\.rails"):
        summarize(data)
