"""The qualification report's renderers on a synthetic report (tests/integration/
qualify_scale.py): what they lead with, the per-test tables that count the rest, the heatmap
binned beyond a screen, and text from nodes and tools kept inert in every one of them."""

from __future__ import annotations

import re

import pytest

from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.reports.model.qualify import Conviction
from clusterdiag.reports.render import qualify_svg as svg
from clusterdiag.reports.render import qualify_words as words
from clusterdiag.reports.render.qualify import render_html, render_md, render_terminal
from tests.integration.qualify_scale import HEALTHY, SLOW_GPU, build


def test_convictions_carry_the_figure_the_peers_the_expectation_and_the_evidence() -> None:
    report, planted = build(16)
    found = {(c.node, c.test): c for c in report.convictions()}
    gpu = found[(planted.slow_gpu[0], "gpu_compute")]
    assert gpu.component == planted.slow_gpu[1]
    assert gpu.status is Status.FAIL
    assert gpu.value == pytest.approx(SLOW_GPU * HEALTHY["gpu_compute"], rel=0.02)
    assert gpu.basis == "peers' median"
    assert gpu.below_pct == pytest.approx(20, abs=2)
    rail = found[(planted.slow_rail[0], "nic")]
    assert (rail.component, rail.expected, rail.floor) == ("mlx5_4/1", 400.0, 380.0)
    assert "NDR" in rail.source
    assert rail.action is Action.RESEAT_CABLE
    hung = found[(planted.hung, "gpu_compute")]
    assert hung.value is None
    assert "hung" in hung.message
    assert "no answer within 300 s" in hung.evidence
    wrong = found[(planted.wrong, "allreduce")]
    assert wrong.evidence == "#  Out of bounds values : 12 FAILED"
    assert (wrong.expected, wrong.source) == (None, "")  # no figure: nothing to compare
    assert {found[(n, "pairs")].status for n in planted.slow_pair} == {Status.WARN}
    order = [c.status for c in report.convictions()]
    assert order == sorted(order, key=lambda s: s is not Status.FAIL)
    assert {c.node for c in report.convictions()} == set(planted.nodes)


def test_per_test_tables_show_the_outliers_and_count_the_rest() -> None:
    report, planted = build(16)
    tables = {t.test: t for t in report.outlier_tables()}
    totals = {test: sum(1 for j in report.figures if j.figure.test == test)
              for test in {j.figure.test for j in report.figures}}
    for test, total in totals.items():
        assert len(tables[test].outliers) + tables[test].rest == total, test
    gpu = tables["gpu_compute"]
    assert [(o.where, o.component) for o in gpu.outliers] == [planted.slow_gpu]
    assert gpu.noun == "GPUs"
    assert gpu.spread_pct is not None
    assert gpu.spread_pct < 1.5  # ±1 % noise
    assert words.rest_words(gpu).startswith(f"{gpu.rest:,} more GPUs within ")
    assert tables["nic"].noun == "rails"
    assert tables["allreduce"].noun == "nodes"
    assert words.rest_words(tables["hbm"]).startswith("all 128 GPUs within ")
    pairs = tables["pairs"]
    assert [o.where for o in pairs.outliers] == [" – ".join(planted.slow_pair)]
    assert pairs.noun == "pair runs"


def _section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


@pytest.mark.parametrize("width", [80, 160])
def test_terminal_leads_with_the_verdict_then_the_parts_then_the_cluster(width: int) -> None:
    report, planted = build(16)
    text = render_terminal(report, width)
    lines = text.splitlines()
    assert lines[0].startswith("QUALIFY NOT READY (FAIL): 4 of 16 node(s) not ready")
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, too_long
    heads = ["Convicted (not ready)", "Cluster findings:", "Scaling:", "Per test:"]
    at = [text.index(h) for h in heads]
    assert at == sorted(at), at
    lead = _section(text, heads[0], heads[1])
    for node in planted.convicted:
        assert node in lead
    assert f"{planted.slow_gpu[0]} {planted.slow_gpu[1]} qualify.gpu_compute" in lead
    assert "evidence: #  Out of bounds values : 12 FAILED" in lead
    assert "expected 400.0, floor 380.0" in lead
    assert "source: NDR line rate 400 Gb/s" in lead
    cluster = _section(text, heads[1], heads[2])
    assert "WARN host-to-device copy bandwidth uniformly slow" in cluster
    assert "slow pair, unattributed" in cluster
    assert "-".join(planted.slow_pair) in cluster


def test_markdown_leads_the_same_way_and_html_too() -> None:
    report, _ = build(16)
    markdown = render_md(report)
    heads = ["## Convicted and suspect parts", "## Cluster findings", "## Scaling",
             "## Per test"]
    at = [markdown.index(h) for h in heads]
    assert at == sorted(at)
    assert markdown.splitlines()[0].startswith("# QUALIFY NOT READY")
    assert markdown.rstrip().endswith(f"Exclude: `{words.folded(report.bad_nodes)}`")
    page = render_html(report)
    order = [page.index(h) for h in ("<h1>QUALIFY NOT READY", "Convicted and suspect parts",
                                      "Cluster findings", "Scaling:", "Per test")]
    assert order == sorted(order)
    assert page.count("<svg") == 3  # the scaling curve, the pairs and the rails heatmaps


def test_a_report_with_hundreds_of_convictions_stays_a_few_hundred_lines() -> None:
    """500 nodes failing the same test: 30 parts listed, the rest folded into one line."""
    report, _ = build(1024)
    for i in range(1, 501):
        report.findings[f"n{i:04d}"].append(Finding(
            Status.FAIL, "gpu3", "GPU compute throughput more than 10 % below peers",
            {"value": 40_000.0, "runs": [40_000.0, 40_100.0]}, {"peers_median": 53_700.0},
            Action.DRAIN, "qualify.gpu_compute"))
    convictions = report.convictions()
    assert len(convictions) > 500
    first, folded, left = words.listed(convictions)
    assert len(first) == words.MAX_LISTED
    assert len(folded) <= words.MAX_FOLDED
    assert left == 0
    for text in (render_terminal(report, 80), render_terminal(report), render_md(report)):
        assert len(text.splitlines()) < 400, len(text.splitlines())
    assert len(render_html(report)) < 200_000


def test_listed_folds_the_rest_by_problem() -> None:
    convictions = [Conviction(f"n{i}", "nic", "mlx5_0/1", Status.FAIL, Action.RESEAT_CABLE,
                              f"problem {i % 15}") for i in range(200)]
    first, folded, left = words.listed(convictions)
    assert [c.node for c in first] == [f"n{i}" for i in range(words.MAX_LISTED)]
    assert len(folded) == words.MAX_FOLDED
    assert left == 15 - words.MAX_FOLDED
    assert sum(len(nodes) for *_, nodes in folded) < 200 - words.MAX_LISTED


def test_heatmap_bins_nodes_beyond_a_screen_and_marks_convicted_bins() -> None:
    report, planted = build(1024)
    nodes = {n for g in report.cross if g.run.test == "pairs" for n in g.run.nodes}
    assert len(nodes) > svg.MAX_NODES_SHOWN
    picture = svg.pair_heatmap(report.cross, "pairs", {planted.slow_pair[0]})
    labels = re.findall(r"<text x=[^>]*text-anchor='end'[^>]*>([^<]*)</text>", picture)
    assert len(labels) <= svg.MAX_NODES_SHOWN
    assert all(label.startswith("n[") for label in labels)
    per = -(-len(nodes) // svg.MAX_NODES_SHOWN)
    assert f"binned by {per}" in svg.legend(report.cross, "pairs")
    assert len(picture) < 60_000, len(picture)
    assert picture.count(f"fill='{svg.HEAT_FAIL}'><title>") == 2  # the slow pair's bin
    assert picture.count("holds a convicted node") == 1
    rails = svg.pair_heatmap(report.cross, "rails")
    assert len(rails) < 60_000, len(rails)  # 4,080 rail runs, one cell per pair of bins
    assert rails.count("<rect") <= 1 + 2 * svg.MAX_NODES_SHOWN


def test_heatmap_keeps_one_row_per_node_up_to_the_limit() -> None:
    report, planted = build(svg.MAX_NODES_SHOWN + 4)  # 4 convicted, left out of the pairs
    picture = svg.pair_heatmap(report.cross, "pairs", set(report.bad_nodes))
    labels = re.findall(r"<text x=[^>]*text-anchor='end'[^>]*>([^<]*)</text>", picture)
    assert len(labels) == svg.MAX_NODES_SHOWN
    assert planted.slow_pair[0] in labels
    assert "one cell per pair" in svg.legend(report.cross, "pairs")


HOSTILE = {
    "n0002": "<img src=x onerror=alert(1)>",  # the slow GPU's node
    "n0007": "evil\x1b]8;;http://x\x07link\x1b]8;;\x07\u202eexe.txt",  # the slow rail's
    "n0012": "[bold red]boom[/]",  # the hung tool's node: rich markup, no node set
    "n0009": "q\u202e<svg onload=alert(1)>",  # one of the slow pair
}
EVIDENCE = "\x1b[2J\x1b[31m<script>alert(1)</script> \u202e|x| **b** [l](http://e) FAILED"
HUNG = "no answer\x07\x1b]0;title\x07 <b>x</b> within 300 s"
RAW = ("\x1b", "\x07", "\u202e")


def _hostile() -> tuple[str, str, str, str]:
    report, planted = build(16, rename=HOSTILE, evidence=EVIDENCE, hung_error=HUNG)
    assert planted.slow_gpu[0] == HOSTILE["n0002"]
    assert HOSTILE["n0009"] in planted.slow_pair
    return (render_terminal(report), render_terminal(report, 80, colour=True),
            render_md(report), render_html(report))


def test_hostile_text_is_inert_in_the_terminal() -> None:
    plain, coloured, _, _ = _hostile()
    for raw in RAW:
        assert raw not in plain, repr(raw)
    assert "\\x1b]8;;http://x\\x07" in plain  # shown as its escapes, not acted on
    assert "\\u202e" in plain
    assert "[bold red]boom[/]" in plain  # no rich markup read
    assert "<img src=x onerror=alert(1)>" in plain  # a terminal runs no HTML
    ours = re.sub(r"\x1b\[[0-9;]*m", "", coloured)  # the only escapes: our colours
    for raw in RAW:
        assert raw not in ours, repr(raw)
    assert "[bold red]boom[/]" in ours


def test_hostile_text_is_inert_in_markdown() -> None:
    _, _, markdown, _ = _hostile()
    for raw in RAW:
        assert raw not in markdown, repr(raw)
    prose, exclude = markdown.rstrip("\n").rsplit("\n", 1)
    assert exclude.startswith("Exclude: `")  # a code span: shown as it is
    assert not re.search(r"(?<!\\)[<>]", prose), re.findall(r".{20}(?<!\\)[<>].{20}", prose)
    assert not re.search(r"(?<!\\)\[l\]\(", prose)  # no link
    assert "\\*\\*b\\*\\*" in prose
    for table in re.findall(r"(?:^\|.*\n?)+", prose, re.MULTILINE):
        rows = table.splitlines()
        columns = rows[1].count("|")  # the |---| line
        for row in rows:
            assert len(re.findall(r"(?<!\\)\|", row)) == columns, row  # no cell broken


def test_hostile_text_is_inert_in_html_and_svg() -> None:
    _, _, _, page = _hostile()
    for raw in RAW:
        assert raw not in page, repr(raw)
    for tag in ("<img", "<script", "<b>", "<svg onload"):
        assert tag not in page, tag
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "q\\u202e&lt;svg onload=alert(1)&gt;" in page  # in the heatmap's labels
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_folded_lists_names_no_node_set_can_hold() -> None:
    assert words.folded(["n2", "n10", "n1"]) == "n[1-2,10]"
    assert words.folded(["run[a].log", "n1"]) == "n1, run[a].log"
    assert words.folded(["x!y"]) == "x!y"  # a node set would read it as x minus y
