"""The shipped Grafana dashboard and Prometheus rules against what a real agent serves.

A simulated DGX H100 agent runs on loopback; /metrics is scraped before and after a planted
XID 79 on GPU 2. Every metric name and label the dashboard's queries and the rules'
expressions read must exist in those scrapes (tests/promql_names.py), and the rules are run
by ``promtool test rules`` over exactly those recorded series.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.promql_names import TARGET_LABELS, parse_exposition, problems, uses

from .daemon_helpers import AgentProc, get

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/grafana/clusterdiag-dashboard.json"
RULES = REPO / "deploy/prometheus/clusterdiag-rules.yaml"
# One agent's scrapes (a 20 s wait for its XID) serve every test: they run on one worker.
pytestmark = pytest.mark.xdist_group("dashboards")
# The XID is due this long after the simulated node is built: after the agent's first
# report (the "before" scrape), also on a loaded CI machine where start-up takes seconds.
SPEC = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": 2, "code": 79, "at_s": 20.0}]}
JOB, INSTANCE = "clusterdiag", "n1:9464"
BEFORE_MIN, AFTER_MIN = 10, 20  # minutes of promtool series from each scrape


def _scrapes(tmp: Path) -> tuple[tuple[str, float], tuple[str, float]]:
    """(text, wall time) before and after the XID, from one agent."""
    agent = AgentProc(tmp, spec=SPEC, interval=0.5)
    try:
        url = agent.wait_ready()
        before = get(f"{url}/metrics")[1].decode(), time.time()
        agent.wait_log("event=xid_recorded")
        deadline = time.monotonic() + 60
        while True:
            after = get(f"{url}/metrics")[1].decode(), time.time()
            if "clusterdiag_node_ready 0.0" in after[0] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        agent.stop()
    return before, after


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple[str, float],
                                                                 tuple[str, float]]:
    (before, _), (after, _) = result = _scrapes(tmp_path_factory.mktemp("agent"))
    # what the promtool test below relies on, as the agent really served it
    assert "clusterdiag_node_ready 1.0" in before, "first report came after the XID"
    assert "clusterdiag_xid_events_total{" not in before
    assert "clusterdiag_node_ready 0.0" in after
    assert re.search(r'^clusterdiag_xid_events_total\{.*code="79".*gpu="2".*\} 1\.0$',
                     after, re.M)
    for text in (before, after):
        assert not re.search(r'^clusterdiag_check_status\{.*status="error"\} 1\.0$', text, re.M)
    return result


def _exposition(scrapes: Any) -> dict[str, list[dict[str, str]]]:
    return parse_exposition([scrapes[0][0], scrapes[1][0]])


def _rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def _recorded() -> dict[str, frozenset[str]]:
    out = {}
    for rule in _rules():
        if "record" in rule:
            out[rule["record"]] = frozenset(uses(rule["expr"]).grouping)
    return out


def _panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        out.append(item)
        out += _panels(item.get("panels", []))
    return out


def test_dashboard_queries_read_what_the_agent_serves(scrapes: Any) -> None:
    expo = _exposition(scrapes)
    dash = json.loads(DASHBOARD.read_text())
    panels = _panels(dash["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    # every query goes to the data source the importer picks, none to a hard-wired one
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource", "job"}
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert all(t["datasource"] == panel["datasource"] for t in panel.get("targets", []))
    titles = {p["title"] for p in panels}
    assert {"Cluster readiness", "Failing checks by node", "Stragglers",
            "XID events by GPU"} <= titles
    checked = 0
    for panel in panels:
        for target in panel.get("targets", []):
            found = problems(target["expr"], expo, _recorded())
            assert not found, (panel["title"], found)
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            assert legend <= uses(target["expr"]).grouping, (panel["title"], legend)
            checked += 1
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)",
                                         var["query"]["query"]).groups()  # type: ignore[union-attr]
            assert metric in expo
            assert (label in TARGET_LABELS or
                                       any(label in s for s in expo[metric]))
            checked += 1
    assert checked >= 11


def test_rules_read_what_the_agent_serves(scrapes: Any) -> None:
    expo = _exposition(scrapes)
    for rule in _rules():
        assert not problems(rule["expr"], expo, _recorded()), rule
        if "alert" not in rule:
            continue
        selected = {k for s in uses(rule["expr"]).selectors for labels in expo.get(s.name, [])
                    for k in labels} | TARGET_LABELS
        for text in rule["annotations"].values():
            used = set(re.findall(r"\$labels\.(\w+)", text))
            assert used <= selected, (rule["alert"], used - selected)


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (CI installs Debian's prometheus)")
    return promtool


def test_promtool_checks_the_rules() -> None:
    proc = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


GRAFANA_MACROS = {"$__rate_interval": "2m", "$__interval": "1m", "$__range": "6h",
                  '"$job"': '".*"'}


def test_promtool_parses_the_dashboards_queries(tmp_path: Path) -> None:
    """Grafana sends each query with its macros filled in: so filled, each must be PromQL
    that Prometheus accepts (checked as a recording rule's expression)."""
    exprs = [t["expr"] for p in _panels(json.loads(DASHBOARD.read_text())["panels"])
             for t in p.get("targets", [])]
    rules = []
    for n, expr in enumerate(exprs):
        for macro, value in GRAFANA_MACROS.items():
            expr = expr.replace(macro, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:query_{n}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout + proc.stderr


def _series(text: str) -> dict[str, tuple[str, str]]:
    """series with the scrape's job/instance -> (name, value), as Prometheus stores it."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            name, _, rest = series.partition("{")
            labels = f'job="{JOB}",instance="{INSTANCE}"' + (f",{rest[:-1]}" if rest else "")
            out[f"{name}{{{labels}}}"] = (name, value)
    return out


def _input_series(scrapes: Any) -> list[dict[str, str]]:
    (before, at_before), (after, at_after) = scrapes
    a, b = _series(before), _series(after)
    out = [{"series": f'up{{job="{JOB}",instance="{INSTANCE}"}}',
            "values": " ".join(["1"] * (BEFORE_MIN + AFTER_MIN + 1))}]
    for key in sorted(set(a) | set(b)):
        name = (a.get(key) or b[key])[0]
        first = [a[key][1] if key in a else "_"] * (BEFORE_MIN + 1)
        then = [b[key][1] if key in b else "_"] * AFTER_MIN
        if name == "clusterdiag_last_collection_timestamp_seconds":
            # promtool's clock starts at 0: keep the age each scrape saw, on that clock
            first = [str(m * 60 - (at_before - float(a[key][1]))) for m in range(BEFORE_MIN + 1)]
            then = [str(m * 60 - (at_after - float(b[key][1])))
                    for m in range(BEFORE_MIN + 1, BEFORE_MIN + AFTER_MIN + 1)]
        out.append({"series": key, "values": " ".join(first + then)})
    return out


def _labels(series_key: str) -> dict[str, str]:
    return dict(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', series_key))


def _alert(rule: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    labels = {k: v for k, v in labels.items() if v}
    rendered = {}
    for key, text in rule["annotations"].items():
        value = re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), text)
        assert "{{" not in value, value  # only $labels templates: nothing left to render
        rendered[key] = value
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rendered}


def test_promtool_runs_the_rules_over_recorded_series(scrapes: Any, tmp_path: Path) -> None:
    promtool = _promtool()
    alerts = {r["alert"]: r for r in _rules() if "alert" in r}
    xid_keys = [k for k in _series(scrapes[1][0])
                if k.startswith("clusterdiag_xid_events_total{")]
    assert len(xid_keys) == 1
    target = {"job": JOB, "instance": INSTANCE}
    firing = {
        5: {},  # healthy: nothing fires
        13: {"ClusterdiagGpuXid": [_alert(alerts["ClusterdiagGpuXid"],
                                          {**_labels(xid_keys[0])})]},
        # the node has been not ready for over 5m; the XID is 14m old, no longer new
        25: {"ClusterdiagNodeNotReady": [_alert(alerts["ClusterdiagNodeNotReady"], target)]},
    }
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": _input_series(scrapes),
            "alert_rule_test": [
                {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": expected.get(name, [])}
                for minute, expected in firing.items() for name in alerts],
            "promql_expr_test": [
                {"expr": "clusterdiag:nodes_ready:sum", "eval_time": "5m",
                 "exp_samples": [{"labels": "clusterdiag:nodes_ready:sum", "value": 1}]},
                {"expr": "clusterdiag:nodes_ready:sum", "eval_time": "25m",
                 "exp_samples": [{"labels": "clusterdiag:nodes_ready:sum", "value": 0}]},
                {"expr": "clusterdiag:nodes_reporting:count", "eval_time": "25m",
                 "exp_samples": [{"labels": "clusterdiag:nodes_reporting:count", "value": 1}]},
            ],
        }],
    }
    path = tmp_path / "clusterdiag-rules.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True,
                          text=True, check=False, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "SUCCESS" in proc.stdout + proc.stderr
