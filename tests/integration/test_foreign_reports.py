"""Reports from other nodes are hostile input: ``report merge`` over
files a hostile agent could have written, read the way an operator meets them: in the
terminal, as Markdown pasted into a ticket, as JSON a script parses, and as the
``--exclude-file`` / ``sbatch --exclude=`` line a job is submitted with."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from tests.conftest import run_cli

HOSTILE = ("[/] [link=https://evil.example/]click[/link] [bold red]x[/] \x1b[2J\x1b]0;owned\x07"
           " \x1b]8;;https://evil.example/\x1b\\osc8\x1b]8;;\x1b\\ <script>alert(1)</script>"
           " <img src=x onerror=alert(2)> `code` ``` | pipe \u202e bidi")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    env = env_for(NodeSpec("g1", "dgx-h100"))
    report = run_node(env, Config(), RunOptions(profile="dgx-h100", budget_s=20))
    data: dict[str, Any] = json.loads(json.dumps(report.to_dict()))
    return data


def _save(directory: Path, template: dict[str, Any], node: str, *, fail: str | None = None,
          **changes: Any) -> str:
    data = copy.deepcopy(template)
    data["node"] = node
    if fail is not None:
        data["findings"][0].update(status="fail", message=fail, component="gpu0")
    data.update(changes)
    stem = re.sub(r"[^a-z0-9]", "_", node)[:40]
    path = directory / f"{len(list(directory.iterdir()))}-{stem}.json"
    path.write_text(json.dumps(data))
    return str(path)


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_terminal_shows_agent_strings_as_text(template: dict[str, Any], tmp_path: Path) -> None:
    bad = _save(tmp_path, template, "evil1", fail=HOSTILE, verdict="fail")
    proc = run_cli("report", "merge", bad)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr == ""
    # Piped output carries no styling, so any escape byte would be the agent's.
    assert "\x1b" not in proc.stdout
    assert "\x07" not in proc.stdout
    assert "\u202e" not in proc.stdout
    text = " ".join(proc.stdout.split())
    for literal in ("[/]", "[link=https://evil.example/]click[/link]", "[bold red]x[/]",
                    "\\x1b[2J", "\\x1b]0;owned\\x07", "\\u202e"):
        assert literal.replace(" ", "") in text.replace(" ", ""), literal


def test_markdown_escapes_html_and_keeps_code_spans_closed(template: dict[str, Any],
                                                           tmp_path: Path) -> None:
    bad = _save(tmp_path, template, "evil1", fail=HOSTILE)
    proc = run_cli("report", "merge", bad, "--format", "md")
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stdout
    page = MarkdownIt("commonmark").enable("table").render(proc.stdout)
    assert "<script" not in page
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<a " not in page  # neither the rich link nor an OSC 8 link became one
    # The check id is agent text inside a code span: a backtick in it closes nothing.
    data = copy.deepcopy(template)
    data["node"] = "evil2"
    data["findings"][0].update(status="fail", check="gpu.count` <script>alert(3)</script> `",
                               message="m")
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data))
    proc = run_cli("report", "merge", str(odd), "--format", "md")
    page = MarkdownIt("commonmark").enable("table").render(proc.stdout)
    assert "<script" not in page


@pytest.mark.parametrize("node", ["x,y --wrap=rm", "gpu[001", "a/b", "n1 n2", "`id`",
                                  "-x", "n\x1b[2J", "a" * 300])
def test_node_names_are_validated_before_the_exclude_line(template: dict[str, Any],
                                                          tmp_path: Path, node: str) -> None:
    good = _save(tmp_path, template, "good1")
    bad = _save(tmp_path, template, node, fail="broken")
    exclude = tmp_path / "exclude"
    proc = run_cli("report", "merge", good, bad, "--format", "md", "--exclude-file",
                   str(exclude))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1  # the bad file is a cluster.reachability fail
    assert "not a valid node name" in proc.stdout
    assert exclude.read_text() == ""
    assert "sbatch --exclude" not in proc.stdout
    proc = run_cli("report", "merge", good, bad, "--format", "json")
    data = _strict_json(proc.stdout)
    assert [n["node"] for n in data["nodes"]] == ["good1"]


def test_cluster_view_recomputes_the_verdict(template: dict[str, Any], tmp_path: Path) -> None:
    liar = _save(tmp_path, template, "liar1", fail="uncorrectable ECC", verdict="pass")
    modest = _save(tmp_path, template, "modest1", verdict="fail")  # all passes
    proc = run_cli("report", "merge", liar, modest, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    data = _strict_json(proc.stdout)
    assert data["bad_nodes"] == "liar1"
    assert {n["node"]: n["verdict"] for n in data["nodes"]} == {"liar1": "fail",
                                                               "modest1": "pass"}


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda d: d["inventory"].update(gpus=d["inventory"]["gpus"][:1] * 100_016), "GPUs"),
    (lambda d: d["inventory"].update(hcas=d["inventory"]["hcas"][:1] * 5_000), "HCAs"),
    (lambda d: d.update(findings=d["findings"][:1] * 200_000), "findings"),
    (lambda d: d.update(findings=[]), "findings"),
    (lambda d: d.update(duration_s=-5), "duration_s"),
    (lambda d: d.update(started_at="yesterday"), "started_at"),
    (lambda d: d["findings"][0].update(message="x" * 100_000), "message"),
    (lambda d: d["findings"][0].update(component=["gpu0"]), "component"),
    (lambda d: d.update(version={"v": 1}), "version"),
])
def test_node_reports_are_validated(template: dict[str, Any], tmp_path: Path, edit: Any,
                                    reason: str) -> None:
    data = copy.deepcopy(template)
    data["node"] = "odd1"
    edit(data)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data))
    good = _save(tmp_path, template, "good1")
    proc = run_cli("report", "merge", str(path), good, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    out = _strict_json(proc.stdout)
    assert out["counts"]["gpus"] == 8
    assert out["counts"]["nodes_ready"] == 1
    reach = [f for f in out["cluster_findings"] if f["check"] == "cluster.reachability"]
    assert reach[0]["status"] == "fail", reach
    assert reason in reach[0]["message"], reach


def test_merge_keeps_the_newest_report_of_a_node(template: dict[str, Any],
                                                 tmp_path: Path) -> None:
    today = template["started_at"]
    old = _save(tmp_path, template, "dup1", started_at="2026-01-01T00:00:00+00:00")
    new = _save(tmp_path, template, "dup1", fail="uncorrectable ECC", started_at=today)
    for order in ((old, new), (new, old)):
        proc = run_cli("report", "merge", *order, "--format", "json")
        assert proc.returncode == 1, proc.stderr
        out = _strict_json(proc.stdout)
        assert out["bad_nodes"] == "dup1"
        dropped = [f for f in out["cluster_findings"] if f["check"] == "cluster.reachability"
                   and f["status"] == "warn"]
        assert len(dropped) == 1, out["cluster_findings"]
        assert "older report" in dropped[0]["message"]
        assert dropped[0]["observed"] == {"files": [old]}
    proc = run_cli("report", "merge", old, new)
    assert "older report of a node given twice" in proc.stdout


def test_a_bracket_in_a_node_name_does_not_crash_merge(template: dict[str, Any],
                                                       tmp_path: Path) -> None:
    bad = _save(tmp_path, template, "bad[node", fail="broken")
    good = _save(tmp_path, template, "good1")
    proc = run_cli("report", "merge", bad, good)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr == ""
    assert "not a valid node name" in proc.stdout


def test_cluster_json_is_always_json(template: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(template)
    data["node"] = "inf1"
    data["findings"][0].update(status="warn", observed=float("inf"), expected=float("nan"))
    data["inventory"]["telemetry"] = {"gpu_temperature_c": float("inf")}
    inf = tmp_path / "inf.json"
    inf.write_text(json.dumps(data))  # Python writes Infinity and NaN, as a hostile agent may
    huge = tmp_path / "huge.json"
    data["node"] = "huge1"
    data["findings"][0].update(observed=1, expected=2)
    huge.write_text(json.dumps(data).replace('"gpu_temperature_c": Infinity',
                                             '"gpu_temperature_c": 1e999'))
    goods = [_save(tmp_path, template, f"g{i}") for i in range(5)]
    proc = run_cli("report", "merge", str(inf), str(huge), *goods, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    out = _strict_json(proc.stdout)
    assert out["counts"]["nodes_ready"] == 5
