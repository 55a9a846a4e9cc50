"""``clusterdiag qualify --tests pairs,rails,scaling,rack`` on simulated clusters: each fault
that only traffic between nodes shows is named on its node (or port, or tray) by the second
pass and by nothing else; the partner it was first paired with is cleared; the schedule
costs the same few rounds at any N; the scaling curve says where it breaks; the report
validates. The simulated tools stand in for nccl-tests and perftest across nodes
(agent/sim/tools.py), never for clusterdiag's own code."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.faults.catalog import FAULTS
from clusterdiag.agent.sim.faults.ib import example_hca
from clusterdiag.checks.core.finding import Status
from clusterdiag.reports.model.qualify import QualifyReport
from clusterdiag.reports.render import qualify_svg as svg
from clusterdiag.reports.render.qualify import render_md, render_terminal
from tests.conftest import REPO, run_cli
from tests.integration.test_html_render import CHROMIUM, FLAGS, png_rows

SCHEMA = REPO / "reports/schema/qualify-report.v1.json"
CROSS = sorted(k for k, f in FAULTS.items() if f.cross)


def _spec(tmp_path: Path, nodes: list[dict[str, Any]], faults: list[dict[str, Any]]) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({"nodes": nodes, "faults": faults}))
    return str(path)


def _run(tmp_path: Path, faults: list[dict[str, Any]], tests: str = "pairs,rails",
         names: str = "q[1-8]", profile: str = "dgx-h100",
         nodes: list[dict[str, Any]] | None = None) -> QualifyReport:
    spec = _spec(tmp_path, nodes or [{"names": names, "profile": profile}], faults)
    return run(Request(simulate=spec, tests=tests), Config())


def _bad(report: QualifyReport) -> list[tuple[str, str, str, Status]]:
    return sorted((node, f.check, f.component, f.status) for node, own in report.findings.items()
                  for f in own if f.status not in (Status.PASS, Status.SKIP))


def _rounds(report: QualifyReport) -> dict[str, int]:
    return dict(report.schedule["rounds_by_test"])


def test_healthy_cluster_passes_in_one_round_per_test(tmp_path: Path) -> None:
    report = _run(tmp_path, [], "pairs,rails,scaling")
    assert not _bad(report), _bad(report)
    assert report.ready
    assert _rounds(report) == {"pairs": 1, "rails": 1, "scaling": 6}  # sizes 2, 4, 8
    checks = {f.check for own in report.findings.values() for f in own}
    assert {"qualify.pairs", "qualify.rails"} <= checks
    pairs = [g for g in report.cross if g.run.test == "pairs"]
    assert len(pairs) == 4
    assert all(g.basis == "peers' median" for g in pairs)


def test_slow_cable_is_named_on_its_node_and_port_and_the_partner_is_cleared(
        tmp_path: Path) -> None:
    """q3's mlx5_4 cable delivers 80 %: its own loopback (node tests) passes, the pair
    q3-q4 is slow, the second pass convicts q3 (with known-good q1) and clears q4."""
    report = _run(tmp_path, [{"node": "q3", "kind": "cable_slow", "hca": "mlx5_4"}],
                  "node,pairs,rails")
    assert _bad(report) == [("q3", "qualify.pairs", "node", Status.FAIL),
                            ("q3", "qualify.rails", "mlx5_4/1", Status.FAIL)]
    assert report.bad_nodes == ["q3"]
    nic = [f for f in report.findings["q3"] if f.check == "qualify.nic"]
    assert nic
    assert all(f.status is Status.PASS for f in nic)
    (rail,) = [f for f in report.findings["q3"] if f.check == "qualify.rails"]
    assert rail.observed["first"]["partner"] == "q4"
    (second,) = rail.observed["second"]
    assert second["partner"] not in ("q3", "q4")
    assert second["status"] == "fail"
    assert second["value"] < 0.85 * rail.expected["reference"]
    assert "second pass" in rail.message
    assert "q4" in rail.message
    cleared = [f for f in report.findings["q4"] if f.check == "qualify.rails"]
    assert [f.status for f in cleared] == [Status.PASS]
    assert "cleared" in cleared[0].message
    assert _rounds(report) == {"pairs": 2, "rails": 2}


def test_the_server_side_of_a_rail_is_found_too(tmp_path: Path) -> None:
    """In pair q3-q4 q4 is the server; the second pass makes it a client of a good node."""
    report = _run(tmp_path, [{"node": "q4", "kind": "cable_slow", "hca": "mlx5_9"}], "rails")
    assert _bad(report) == [("q4", "qualify.rails", "mlx5_9/1", Status.FAIL)]


def test_the_odd_node_is_tested_with_a_known_good_partner(tmp_path: Path) -> None:
    report = _run(tmp_path, [{"node": "q5", "kind": "cable_slow", "hca": "mlx5_0"}],
                  "pairs", names="q[1-5]")
    assert _bad(report) == [("q5", "qualify.pairs", "node", Status.FAIL)]
    (finding,) = [f for f in report.findings["q5"] if f.check == "qualify.pairs"]
    assert "odd node" in finding.message
    assert _rounds(report) == {"pairs": 2}


def test_socket_fallback_between_nodes_is_named(tmp_path: Path) -> None:
    report = _run(tmp_path, [{"node": "q6", "kind": "nccl_socket_fallback"}], "pairs")
    assert _bad(report) == [("q6", "qualify.pairs", "node", Status.FAIL)]
    (finding,) = [f for f in report.findings["q6"] if f.check == "qualify.pairs"]
    assert "Socket" in str(finding.observed)


def test_a_mixed_cluster_is_judged_inside_each_profile(tmp_path: Path) -> None:
    """GB200 trays' pairs (four 400G rails) run at half the DGX H100 pairs' (eight) bus
    bandwidth: judged against one median every GB200 pair would be a straggler, and one
    all-reduce over both would scale "50 %". Each profile is its own peer group, and a
    node slow inside its group is still found."""
    nodes = [{"names": "q[1-6]", "profile": "dgx-h100"},
             {"names": "g[1-6]", "profile": "gb200-nvl72"}]
    (tmp_path / "healthy").mkdir()
    healthy = _run(tmp_path / "healthy", [], "pairs,scaling", nodes=nodes)
    assert not _bad(healthy), _bad(healthy)
    assert not [c.finding for c in healthy.cluster.findings
                if c.finding.status is not Status.PASS], healthy.cluster.findings
    pairs = [g.run.nodes for g in healthy.cross if g.run.test == "pairs"]
    assert pairs
    assert all(len({n[0] for n in nodes}) == 1 for nodes in pairs), pairs
    assert {p.group for p in healthy.scaling} == {"dgx-h100", "gb200-nvl72"}, healthy.scaling
    slow = _run(tmp_path, [{"node": "g3", "kind": "node_uplink_slow", "factor": 0.5}], "pairs",
                nodes=nodes)
    assert _bad(slow) == [("g3", "qualify.pairs", "node", Status.FAIL)], _bad(slow)


def test_a_node_the_node_tests_failed_is_left_out(tmp_path: Path) -> None:
    report = _run(tmp_path, [{"node": "q2", "kind": "hbm_slow", "gpu": 1}], "node,pairs")
    assert {n for n, *_ in _bad(report)} == {"q2"}
    assert not [g for g in report.cross if "q2" in g.run.nodes]
    assert any("q2" in n and "left out" in n for n in report.notes)


@pytest.mark.parametrize("count", [16, 64])
def test_rounds_do_not_grow_with_the_cluster(tmp_path: Path, count: int) -> None:
    faults = [{"node": "q3", "kind": "cable_slow", "hca": "mlx5_10"},
              {"node": "q10", "kind": "cable_slow", "hca": "mlx5_6"}]
    report = _run(tmp_path, faults, "pairs", names=f"q[1-{count}]")
    assert _bad(report) == [("q10", "qualify.pairs", "node", Status.FAIL),
                            ("q3", "qualify.pairs", "node", Status.FAIL)]
    assert _rounds(report) == {"pairs": 2}


def test_scaling_breaks_where_the_group_crosses_a_slow_spine(tmp_path: Path) -> None:
    """Racks r1 (q1-q4) and r2 (q5-q8), r2's uplinks at 70 %: 2 and 4 nodes stay in r1 and
    scale; 8 nodes cross the spine and break. Nobody is excluded for it."""
    nodes = [{"names": "q[1-4]", "profile": "dgx-h100", "rack": "r1"},
             {"names": "q[5-8]", "profile": "dgx-h100", "rack": "r2"}]
    faults = [{"node": "q[5-8]", "kind": "uplink_slow", "factor": 0.7}]
    report = _run(tmp_path, faults, "pairs,scaling", nodes=nodes)
    assert not _bad(report)
    assert report.ready
    assert report.verdict is Status.WARN
    assert [p.nodes for p in report.scaling] == [2, 4, 8]
    assert [p.status for p in report.scaling] == [Status.PASS, Status.PASS, Status.FAIL]
    eight = report.scaling[-1]
    assert eight.efficiency is not None
    assert 0.65 < eight.efficiency < 0.75
    assert report.scaling[0].default is not None
    assert report.scaling[0].ring is not None
    assert report.scaling[0].default > 1.1 * report.scaling[0].ring  # NVLSTree on 2 nodes
    (broken,) = [c.finding for c in report.cluster.findings
                 if c.finding.check == "qualify.scaling"]
    assert broken.status is Status.WARN
    assert "at 8 nodes" in broken.message
    assert f"WARN {broken.message}" in render_terminal(report)
    assert f"WARN {broken.message}" in render_md(report)


NVL72 = [{"names": "t[01-18]", "profile": "gb200-nvl72", "rack": "r1"},
         {"names": "u[01-18]", "profile": "gb200-nvl72", "rack": "r2"}]


def test_healthy_racks_pass_against_the_rack_figure(tmp_path: Path) -> None:
    report = _run(tmp_path, [], "rack", nodes=NVL72)
    assert not _bad(report)
    racks = [g for g in report.cross if g.run.stage == "rack"]
    assert len(racks) == 2
    assert all(g.basis == "expected" and g.reference == 846.8
                                   for g in racks)
    assert _rounds(report) == {"rack": 2}  # the IMEX channels, then both racks at once


def test_a_slow_tray_is_named_and_a_missing_imex_channel_too(tmp_path: Path) -> None:
    faults = [{"node": "t05", "kind": "mnnvl_slow"},
              {"node": "u07", "kind": "imex_channel_missing"}]
    report = _run(tmp_path, faults, "rack", nodes=NVL72)
    assert _bad(report) == [("t05", "qualify.rack", "node", Status.FAIL),
                            ("u07", "qualify.rack", "node", Status.FAIL)]
    (imex,) = [f for f in report.findings["u07"] if f.status is Status.FAIL]
    assert imex.action.value == "fix_config"
    assert "IMEX" in imex.message
    (tray,) = [f for f in report.findings["t05"] if f.status is Status.FAIL]
    assert "second pass" in tray.message


def _cross_fault(kind: str) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    spec = FAULTS[kind]
    if spec.profiles and "dgx-h100" not in spec.profiles:
        return NVL72, {"node": "t03", "kind": kind, **({"gpu": 1} if "gpu" in spec.keys
                                                       else {})}, "rack"
    fault: dict[str, Any] = {"node": "q3", "kind": kind}
    if "hca" in spec.keys:
        fault["hca"] = example_hca("dgx-h100", kind)
    nodes = [{"names": "q[1-4]", "profile": "dgx-h100", "rack": "r1"},
             {"names": "q[5-8]", "profile": "dgx-h100", "rack": "r2"}]
    return nodes, fault, "node,pairs,rails,scaling"


@pytest.mark.parametrize("kind", CROSS)
def test_cross_fault_is_named_by_its_check_only(tmp_path: Path, kind: str) -> None:
    spec = FAULTS[kind]
    nodes, fault, tests = _cross_fault(kind)
    report = _run(tmp_path, [fault], tests, nodes=nodes)
    if spec.component == "cluster":  # how the fabric scales: the cluster's finding
        hits = [c.finding for c in report.cluster.findings if c.finding.check == spec.check
                and c.finding.status.value == spec.status]
        assert hits, report.cluster.findings
        assert not _bad(report)
        return
    bad = _bad(report)
    if spec.status == "error":
        # A pair's run that is not one job cannot say which of its two builds lacks MPI:
        # the error lands on the pair, an error to fix on each, never a drain.
        assert fault["node"] in {n for n, *_ in bad}, bad
        assert len({n for n, *_ in bad}) <= 2, bad
        assert {b[3] for b in bad} == {Status.ERROR}, bad
    else:
        assert {n for n, *_ in bad} == {fault["node"]}, bad
    assert not [b for b in bad if b[1].removeprefix("qualify.") not in
                ("pairs", "rails", "rack")], bad  # the node tests all pass
    hits = [f for f in report.findings[fault["node"]] if f.check == spec.check
            and f.status.value == spec.status]
    assert spec.component.format(**fault) in {f.component for f in hits}, bad
    assert spec.action in {f.action.value for f in hits}


def test_report_json_validates_with_the_cross_section(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [{"names": "q[1-6]", "profile": "dgx-h100"}],
                 [{"node": "q2", "kind": "cable_slow", "hca": "mlx5_3"}])
    out = tmp_path / "report.json"
    proc = run_cli("qualify", "--simulate", spec, "--tests", "pairs,rails,scaling", "--format",
                   "json", "--output", str(out), timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(data)
    assert data["bad_nodes"] == "q2"
    cross = data["qualify"]["cross"]
    assert cross["schedule"]["rounds_by_test"]["pairs"] == 2
    assert [p["nodes"] for p in cross["scaling"]] == [2, 4, 5]
    seconds = [f for f in cross["figures"] if f["stage"] == "second"]
    assert seconds
    assert all(f["nodes"][0] in ("q1", "q2") for f in seconds)


def test_one_node_cannot_be_paired_exit_3(tmp_path: Path) -> None:
    proc = run_cli("qualify", "--simulate", "dgx-h100", "--tests", "pairs", timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "no test between nodes could run" in proc.stderr
    assert "Traceback" not in proc.stderr


def _hex(colour: str) -> tuple[int, int, int]:
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_html_heatmap_and_scaling_curve_render_in_chromium(tmp_path: Path) -> None:
    """The page is one file (inline SVG, no script, nothing fetched); in Chromium the
    heatmap shows the slow pairs' red cells beside green ones and the curve its Ring line."""
    nodes = [{"names": "q[1-4]", "profile": "dgx-h100", "rack": "r1"},
             {"names": "q[5-8]", "profile": "dgx-h100", "rack": "r2"}]
    spec = _spec(tmp_path, nodes, [{"node": "q3", "kind": "cable_slow", "hca": "mlx5_4"},
                                   {"node": "q[5-8]", "kind": "uplink_slow", "factor": 0.7}])
    page = tmp_path / "q.html"
    proc = run_cli("qualify", "--simulate", spec, "--tests", "pairs,scaling", "--format",
                   "html", "--output", str(page), timeout=120)
    assert proc.returncode == 1, proc.stderr
    text = page.read_text()
    assert "<script" not in text
    assert "href=" not in text
    assert "src=" not in text
    assert text.count("<svg") == 2  # the pairs heatmap, the scaling curve
    assert "q3–q4" in text  # the convicting first-pass cell's tooltip
    shot = tmp_path / "q.png"
    flags = [f for f in FLAGS if not f.startswith("--window-size")]
    subprocess.run([str(CHROMIUM), *flags, "--window-size=1280,2000",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=90, check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    _, _height, rows = png_rows(shot.read_bytes(), limit=2000)
    seen = {px for row in rows for px in row}
    for colour in (svg.HEAT_FAIL, svg.HEAT_PASS, svg.RING):
        assert _hex(colour) in seen, f"{colour} is nowhere on the page"
    fail_pixels = sum(px == _hex(svg.HEAT_FAIL) for row in rows for px in row)
    assert fail_pixels > 4 * 8 * 8  # q3's cells with q4 and q1, both ways, and a marker


def _fails(report: QualifyReport) -> list[tuple[str, str]]:
    return sorted((node, f.check) for node, own in report.findings.items() for f in own
                  if f.status is Status.FAIL)


@pytest.mark.parametrize(("names", "faulty"), [("q[1-2]", "q2"), ("q[1-8]", "q[1-8]")])
def test_a_slow_pair_without_a_known_good_partner_convicts_neither(
        tmp_path: Path, names: str, faulty: str) -> None:
    """Two nodes, or every pair slow (a switch, a shared cause): the first pass says only
    "one of these two, or the path", and no pair passed to tell which. The cluster is not
    ready (a cluster-level fail, "slow pair, unattributed"), yet nobody is failed, drained
    or in bad_nodes: each node carries a warning naming the pair."""
    report = _run(tmp_path, [{"node": faulty, "kind": "cable_slow", "hca": "mlx5_4",
                              "factor": 0.5}], "rails", names=names)
    assert _fails(report) == []
    assert report.bad_nodes == []
    assert not report.ready
    unattributed = [c for c in report.cluster.findings
                    if c.finding.message.startswith("slow pair, unattributed")]
    assert unattributed
    assert all(c.finding.status is Status.FAIL and not c.nodes for c in unattributed)
    for node, own in report.findings.items():
        (rail,) = [f for f in own if f.check == "qualify.rails"]
        assert rail.status is Status.WARN, (node, rail)
        assert "no known-good partner" in rail.message
        assert rail.action.value == "investigate"


def test_the_odd_node_with_no_known_good_partner_is_skipped_not_unlistable(
        tmp_path: Path) -> None:
    """Three nodes, the pair q1-q2 slow: the odd node q3 has nobody known-good to meet.
    It is said so (a skip with the reason), not 'could not list the node's GPUs'."""
    report = _run(tmp_path, [{"node": "q2", "kind": "cable_slow", "hca": "mlx5_4"}],
                  "rails", names="q[1-3]")
    assert "q3" not in report.bad_nodes
    (rail,) = report.findings["q3"]
    assert rail.check == "qualify.rails"
    assert rail.status is Status.SKIP
    assert "odd node" in rail.message
    assert "known-good" in rail.message


def test_markup_in_node_names_is_inert_in_every_report(tmp_path: Path) -> None:
    """Node names come from the cluster (a nodeset, a spec, a log file). A name with HTML
    in it is no host name and is refused in one line; a host name may still hold Markdown
    syntax (``__q1__`` is bold), which the Markdown report escapes and the HTML shows as
    text."""
    from clusterdiag.reports.render.qualify import render_html

    spec = _spec(tmp_path, [{"names": "<img/src=x/onerror=alert(1)>1", "profile": "dgx-h100"}],
                 [])
    refused = run_cli("qualify", "--simulate", str(spec), "--tests", "pairs")
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "not a host name" in refused.stderr
    names = ["__q1__", "__q2__", "q3", "q4"]
    nodes = [{"names": n, "profile": "dgx-h100"} for n in names]
    report = _run(tmp_path, [{"node": names[0], "kind": "cable_slow", "hca": "mlx5_4"}],
                  "pairs", nodes=nodes)
    assert report.bad_nodes == [names[0]]
    markdown, page = render_md(report), render_html(report)
    prose, exclude = markdown.rstrip("\n").rsplit("\n", 1)
    assert exclude == f"Exclude: `{names[0]}`"  # a code span: shown as it is
    assert not re.search(r"(?<!\\)__q", prose), prose
    assert "\\_\\_q1\\_\\_" in prose
    assert "<strong>q1" not in page
    assert "__q1__" in page
