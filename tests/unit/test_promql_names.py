"""The dashboard/rules checker must catch what would make a panel silently empty."""

from __future__ import annotations

import pytest

from tests.promql_names import Unfollowable, parse_exposition, problems, uses

EXPOSITION = parse_exposition(["""\
# HELP clusterdiag_check_status x
# TYPE clusterdiag_check_status gauge
clusterdiag_check_status{check="gpu.xid",status="fail"} 1.0
clusterdiag_check_status{check="gpu.xid",status="pass"} 0.0
clusterdiag_node_info{node="n1",profile="dgx-h100"} 1.0
clusterdiag_xid_events_total{code="79",gpu="2",UUID=""} 1.0
"""])


def test_selectors_and_grouping_are_found() -> None:
    found = uses('max by (node, check) (clusterdiag_check_status{status=~"fail|error"} '
                 '* on (instance) group_left (node) clusterdiag_node_info) == 1')
    assert [s.name for s in found.selectors] == ["clusterdiag_check_status",
                                                 "clusterdiag_node_info"]
    assert found.selectors[0].matchers == [("status", "=~", "fail|error")]
    assert found.grouping == {"node", "check", "instance"}
    offset = uses("x unless x offset 10m and rate(y[$__rate_interval]) > 0")
    assert [s.name for s in offset.selectors] == ["x", "x", "y"]


def test_a_good_expression_has_no_problems() -> None:
    expr = ('sum by (node, check) (clusterdiag_check_status{status="fail", job=~"$job"} '
            '* on (instance) group_left (node) clusterdiag_node_info)')
    assert problems(expr, EXPOSITION) == []
    assert problems('up{job="clusterdiag"} == 0', EXPOSITION) == []
    assert problems('increase(clusterdiag_xid_events_total{code="79"}[10m]) > 0',
                    EXPOSITION) == []


@pytest.mark.parametrize(("expr", "problem"), [
    ("clusterdiag_check_statuses == 1", "clusterdiag_check_statuses: no such series"),
    ('clusterdiag_check_status{state="fail"}', "clusterdiag_check_status: no label state"),
    ('clusterdiag_check_status{status="failed"}', 'no series with status="failed"'),
    ('clusterdiag_check_status{status=~"fail|broken"}', 'no series with status="broken"'),
    ('clusterdiag_check_status{check=~"nv.*"}', "matches nothing"),
    ("sum by (hostname) (clusterdiag_check_status)", "label hostname (by/on/group)"),
    # an empty label value is no label to Prometheus
    ('clusterdiag_xid_events_total{UUID="GPU-1"}', "no label UUID"),
])
def test_mistakes_are_reported(expr: str, problem: str) -> None:
    found = problems(expr, EXPOSITION)
    assert any(problem in p for p in found), found


@pytest.mark.parametrize("expr", [
    'label_replace(clusterdiag_node_info, "host", "$1", "node", "(.*)")',
    "holt_winters(clusterdiag_node_info[5m], 0.1, 0.1)",
    '{__name__="clusterdiag_node_info"}',
])
def test_what_it_cannot_follow_is_refused(expr: str) -> None:
    with pytest.raises(Unfollowable):
        problems(expr, EXPOSITION)
