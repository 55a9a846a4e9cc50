"""``clusterdiag qualify`` on simulated clusters: healthy platforms qualify with no fail,
every active fault kind is named on its node and component and by nothing else, a hung
tool is killed with its process tree, a missing tool skips, nothing runnable is exit 3;
the report validates against its schema, renders in Chromium, drains and keeps a baseline."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.qualify.drain import qualify_reason
from clusterdiag.agent.qualify.plan import DEADLINES, NODE_TESTS
from clusterdiag.agent.qualify.run import QualifyOptions, qualify
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.faults.catalog import FAULTS
from clusterdiag.agent.sim.faults.ib import example_hca
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.agent.sim.tools import SimTools, simulated_cluster
from clusterdiag.checks.core.finding import Status
from tests.conftest import REPO, run_cli
from tests.integration.test_html_render import CHROMIUM, FLAGS, NOT_READY_RED, png_rows
from tests.integration.test_prolog_cli import Slurm
from tests.processes import still_running
from tests.real import real_file, real_names

SCHEMA = REPO / "reports/schema/qualify-report.v1.json"
NODES = 5  # enough peers for a median


def _spec(tmp_path: Path, profile: str, faults: list[dict[str, object]]) -> str:
    spec = {"nodes": [{"names": f"q[1-{NODES}]", "profile": profile}], "faults": faults}
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))
    return str(path)


def _qualify(spec: str, settings: dict[str, object] | None = None, seed: int = 0,
             tests: frozenset[str] = frozenset(NODE_TESTS),
             ) -> tuple[dict[str, list[object]], SimTools]:
    nodes, tools = simulated_cluster(spec, seed)
    options = QualifyOptions(tests, settings=settings or {})
    outcome = qualify(sorted(nodes), tools, {n: s.profile for n, s in nodes.items()}, options)
    return dict(outcome.judgement.findings), tools


def _bad(findings: dict[str, list[object]]) -> list[tuple[str, object]]:
    return [(node, f) for node, own in findings.items() for f in own
            if f.status not in (Status.PASS, Status.SKIP)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
def test_healthy_cluster_qualifies_with_no_fail(tmp_path: Path, profile: str) -> None:
    findings, _ = _qualify(_spec(tmp_path, profile, []), seed=7)
    assert not _bad(findings), _bad(findings)
    passed = {f.check for own in findings.values() for f in own  # type: ignore[attr-defined]
              if f.status is Status.PASS}
    assert {"qualify.allreduce", "qualify.h2d", "qualify.hbm", "qualify.gpu_compute"} <= passed


ACTIVE = sorted(k for k, f in FAULTS.items() if f.active and not f.cross)


def _fault(kind: str) -> tuple[str, dict[str, object]]:
    spec = FAULTS[kind]
    profile = spec.profiles[0] if spec.profiles else "dgx-h100"
    fault: dict[str, object] = {"node": "q3", "kind": kind}
    if "gpu" in spec.keys:
        fault["gpu"] = 3
    if "hca" in spec.keys:
        fault["hca"] = example_hca(profile, kind)
    return profile, fault


@pytest.mark.parametrize("kind", [k for k in ACTIVE if k != "tool_hang"])
def test_active_fault_is_named_on_its_node_and_component_only(tmp_path: Path,
                                                              kind: str) -> None:
    profile, fault = _fault(kind)
    findings, _ = _qualify(_spec(tmp_path, profile, [fault]))
    spec = FAULTS[kind]
    component = spec.component.format(**fault)
    bad = _bad(findings)
    if spec.silent:  # a correct caller copes: nothing trips, the test still passes
        assert not bad, bad
        assert any(f.check == spec.check and f.status is Status.PASS  # type: ignore[attr-defined]
                   for f in findings["q3"]), findings["q3"]
        return
    assert {node for node, _ in bad} == {"q3"}, bad
    assert {f.component for _, f in bad} == {component}, bad  # type: ignore[attr-defined]
    hits = [f for _, f in bad if f.check == spec.check]  # type: ignore[attr-defined]
    assert hits, bad
    assert {f.status.value for f in hits} == {spec.status}, bad
    assert spec.action in {f.action.value for f in hits}


def test_gentle_slowdown_is_a_warning_and_noise_is_nothing(tmp_path: Path) -> None:
    """7 % slow is between the warn (5 %) and fail (10 %) lines; every healthy GPU with
    1 % noise stays clear of both."""
    fault = {"node": "q2", "kind": "hbm_slow", "gpu": 1, "factor": 0.93}
    findings, _ = _qualify(_spec(tmp_path, "dgx-h100", [fault]))
    bad = _bad(findings)
    assert [(n, f.check, f.status, f.component) for n, f in bad] == [  # type: ignore[attr-defined]
        ("q2", "qualify.hbm", Status.WARN, "gpu1")]


def test_hung_tool_is_killed_with_its_process_tree(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dgx-a100", [{"node": "q2", "kind": "tool_hang"}])
    # Deadlines are per run (the invocation's name). gpu_burn is left out: a burn long
    # enough to print a rate (two batches, ~20 s on an A100 in FP64) would keep the hung
    # stand-in waiting that long in real time; the kill is the same for every tool.
    findings, tools = _qualify(spec, {"deadline_s": {run: 1.5 for run in DEADLINES}},
                               tests=frozenset(NODE_TESTS) - {"gpu_compute"})
    bad = _bad(findings)
    assert {n for n, _ in bad} == {"q2"}
    assert all(f.status is Status.FAIL and "hung" in f.message  # type: ignore[attr-defined]
               for _, f in bad)
    assert "qualify.allreduce" in {f.check for _, f in bad}  # type: ignore[attr-defined]
    assert tools.hung_pids, "the hanging stand-in never started"
    # the child of the hung parent is gone too (once the kernel has run its exit)
    assert not still_running(list(tools.hung_pids)), tools.hung_pids


TOOLS = frozenset({"nvidia-smi", "ibstat", "all_reduce_perf", "nvbandwidth", "ib_write_bw",
                   "gpu_burn", "dcgmi"})


def _with_tools(tmp_path: Path, installed: frozenset[str],
                faults: list[dict[str, object]]) -> dict[str, list[object]]:
    nodes, _ = simulated_cluster(_spec(tmp_path, "dgx-h100", faults))
    tools = SimTools(nodes, installed=installed)
    outcome = qualify(sorted(nodes), tools, {n: s.profile for n, s in nodes.items()},
                      QualifyOptions(frozenset(NODE_TESTS)))
    return dict(outcome.judgement.findings)


def test_missing_tool_skips_with_the_install_hint(tmp_path: Path) -> None:
    findings = _with_tools(tmp_path, TOOLS - {"dcgmi", "gpu_burn"}, [])
    skipped = {f.check: str(f.observed) for f in findings["q1"]  # type: ignore[attr-defined]
               if f.status is Status.SKIP}  # type: ignore[attr-defined]
    assert set(skipped) == {"qualify.dcgm", "qualify.gpu_compute"}
    assert "install DCGM" in skipped["qualify.dcgm"]
    assert "gpu-burn" in skipped["qualify.gpu_compute"]
    assert not _bad(findings)


def test_compute_falls_back_to_dcgm_diagnostic(tmp_path: Path) -> None:
    """Without gpu_burn, DCGM's FP64 diagnostic gives the per-GPU compute figures, and the
    DCGM run itself (dcgmi diag -r 2 -j) passes on a node whose parts are all healthy."""
    fault = {"node": "q4", "kind": "gpu_slow", "gpu": 2}
    findings = _with_tools(tmp_path, TOOLS - {"gpu_burn"}, [fault])
    bad = _bad(findings)
    assert [(n, f.check, f.component) for n, f in bad] == [  # type: ignore[attr-defined]
        ("q4", "qualify.gpu_compute", "gpu2")]
    dcgm = [f for f in findings["q1"] if f.check == "qualify.dcgm"]  # type: ignore[attr-defined]
    assert [f.status for f in dcgm] == [Status.PASS]  # type: ignore[attr-defined]


def test_nothing_runnable_is_exit_3(tmp_path: Path) -> None:
    nodes, _ = simulated_cluster(_spec(tmp_path, "dgx-h100", []))
    tools = SimTools(nodes, installed=frozenset({"nvidia-smi", "ibstat"}))
    outcome = qualify(sorted(nodes), tools, {n: s.profile for n, s in nodes.items()},
                      QualifyOptions(frozenset(NODE_TESTS)))
    assert not outcome.anything_ran
    assert all(r.skipped for r in outcome.runs)
    proc = run_cli("qualify", "--via", "local", "--profile", "dgx-h100", timeout=60,
                   env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 3, proc.stderr
    assert "no test could run" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_budget_bounds_the_run(tmp_path: Path) -> None:
    """The hung node's inventory probe (``ib_write_bw --help``) hangs too: the budget, not
    the probe's own deadline (30 s) or the tool's (300 s), bounds the run."""
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q1", "kind": "tool_hang"}])
    nodes, tools = simulated_cluster(spec)
    options = QualifyOptions(frozenset(NODE_TESTS), budget_s=3.0, settings={"repeat": False})
    outcome = qualify(sorted(nodes), tools, {n: s.profile for n, s in nodes.items()}, options)
    assert outcome.seconds < 20
    assert any("budget" in (r.error or "") for r in outcome.runs if r.node == "q1")


def test_report_json_validates_and_folds_bad_nodes(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q2", "kind": "nvlink_slow", "gpu": 3},
                                        {"node": "q4", "kind": "rail_slow", "hca": "mlx5_4"}])
    out = tmp_path / "report.json"
    exclude = tmp_path / "exclude"
    proc = run_cli("qualify", "--simulate", spec, "--format", "json", "--output", str(out),
                   "--exclude-file", str(exclude), timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(data)
    assert data["schema"] == "clusterdiag/qualify-report/v1"
    assert data["bad_nodes"] == "q[2,4]"
    assert exclude.read_text() == "q[2,4]\n"
    slow = [f for f in data["qualify"]["figures"] if f["status"] == "fail"]
    assert {(f["node"], f["component"]) for f in slow} >= {("q2", "gpu3"), ("q4", "mlx5_4/1")}
    assert all(f["peers_median"] and f["source"] for f in slow if f["test"] == "nic")


def test_terminal_leads_with_the_verdict(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q5", "kind": "gpu_slow", "gpu": 6}])
    proc = run_cli("qualify", "--simulate", spec, timeout=120)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("QUALIFY NOT READY")
    assert "q5" in lines[0]
    assert any("q5 gpu6" in line and "qualify.gpu_compute" in line for line in lines)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_html_report_renders_in_chromium(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q2", "kind": "pcie_slow", "gpu": 1}])
    page = tmp_path / "q.html"
    proc = run_cli("qualify", "--simulate", spec, "--format", "html", "--output", str(page),
                   timeout=120)
    assert proc.returncode == 1, proc.stderr
    text = page.read_text()
    assert "<script" not in text
    # nothing fetched: the inline SVGs' namespace is a name, not an address
    assert "http" not in text.split("</style>")[1].replace("='http://www.w3.org/2000/svg'", "")
    shot = tmp_path / "q.png"
    subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=90,
                   check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    _, _, rows = png_rows(shot.read_bytes(), limit=60)
    banner = [px for row in rows[5:40] for px in row]
    assert sum(px == NOT_READY_RED for px in banner) > 0.7 * len(banner)
    assert shot.stat().st_size > 30_000, "the page is close to blank"


def test_drain_names_test_and_part_and_spares_an_operator_reason(tmp_path: Path) -> None:
    slurm = Slurm(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"prolog: {{scontrol: {slurm.program}}}\n")
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q3", "kind": "rail_slow", "hca": "mlx5_4"}])
    slurm.node("q3", "IDLE")
    proc = run_cli("qualify", "--simulate", spec, "--drain", "--config", str(config),
                   timeout=120)
    assert proc.returncode == 1, proc.stderr
    (update,) = slurm.updates()
    assert update[1] == "NodeName=q3"
    assert update[2] == "State=DRAIN"
    assert update[3].startswith("Reason=clusterdiag: qualify nic mlx5_4/1 ")
    slurm.node("q3", "DRAIN", reason="bad PSU, ticket 42")
    proc = run_cli("qualify", "--simulate", spec, "--drain", "--config", str(config),
                   timeout=120)
    assert len(slurm.updates()) == 1
    assert "kept the existing reason" in proc.stdout


def test_reason_is_one_short_line() -> None:
    from clusterdiag.checks.core.finding import Action, Finding

    reason = qualify_reason([Finding(Status.FAIL, "gpu3", "x", {"value": 297.9},
                                     {"unit": "GB/s"}, Action.DRAIN, "qualify.d2d")])
    assert reason == "clusterdiag: qualify d2d gpu3 297.9 GB/s"


def test_baseline_is_saved_then_drift_is_reported(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    healthy = _spec(tmp_path, "dgx-h100", [])
    first = run(Request(simulate=healthy, baseline=base), Config())
    assert base.is_file()
    assert not first.drift
    assert "saved" in " ".join(first.notes)
    slow = _spec(tmp_path, "dgx-h100", [{"node": "q1", "kind": "hbm_slow", "gpu": 2}])
    later = run(Request(simulate=slow, baseline=base, seed=3), Config())
    worst = later.drift[0]
    assert (worst["node"], worst["test"], worst["component"]) == ("q1", "hbm", "gpu2")
    assert worst["change_pct"] < -15
    assert all(abs(d["change_pct"]) < 6 for d in later.drift[1:])
    # Beyond qualify.drift_pct (10 %) a warning on the node naming test and part; the
    # others moved less and carry none.
    drifted = [(node, f.component, f.status) for node, own in later.findings.items()
               for f in own if "below its baseline" in f.message]
    assert drifted == [("q1", "gpu2", Status.WARN)]
    strict = run(Request(simulate=slow, baseline=base, seed=3),
                 Config(data={**Config().data, "qualify": {**Config().section("qualify"),
                                                           "drift_pct": 50.0}}))
    assert not any("below its baseline" in f.message for own in strict.findings.values()
                   for f in own)


def test_from_logs_cli_reports_every_file(tmp_path: Path) -> None:
    files = [str(real_file("real/active", "active", name))
             for name in real_names("real/active", "active")]
    out = tmp_path / "logs.json"
    proc = run_cli("qualify", "--profile", "dgx-a100", "--format", "json", "--output",
                   str(out), "--from-logs", *files, timeout=60)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(out.read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(data)
    rows = {Path(r["node"]).name: r for r in data["qualify"]["runs"]}
    assert len(rows) == len(files)
    assert rows[Path(files[0]).name]["figure"]["value"] == 231.72
    unknown = next(r for name, r in rows.items() if name.startswith("10_"))
    assert unknown["verdict"] == "error"
    assert unknown["tool"] == "unknown"


@pytest.mark.parametrize(("text", "said"), [
    ("extends: dgx-h100\ngpu_cont: 8\n", "unknown key 'gpu_cont' (did you mean 'gpu_count'?)"),
    ("extends: dgx-h100\ngpu_count: eight\n", "key 'gpu_count' must be"),
    ("extends: dgx-h99\n", "key 'extends': unknown profile 'dgx-h99' (did you mean"),
])
def test_bad_site_profile_is_one_line_exit_2(tmp_path: Path, text: str, said: str) -> None:
    """qualify reads --profile FILE with the validated loader of agent/settings/site_profiles.py,
    like every other command (both for a run and for --from-logs)."""
    profile = tmp_path / "mysite.yaml"
    profile.write_text(text)
    spec = _spec(tmp_path, "dgx-h100", [])
    for args in (("--simulate", spec), ("--from-logs", str(profile))):
        proc = run_cli("qualify", *args, "--profile", str(profile), timeout=120)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert said in lines[0], proc.stderr
        assert str(profile) in lines[0], proc.stderr


def test_a_run_cut_short_by_the_budget_is_our_error_not_a_hang(tmp_path: Path) -> None:
    """q1's tool would run past the 4 s left of the budget (its own deadline is minutes):
    stopping it there is our deadline, an error naming the budget, never a hang (a fail
    and a drain) of the node."""
    spec = _spec(tmp_path, "dgx-h100", [{"node": "q1", "kind": "tool_hang"}])
    nodes, tools = simulated_cluster(spec)
    options = QualifyOptions(frozenset(NODE_TESTS), budget_s=4.0, settings={"repeat": False})
    outcome = qualify(sorted(nodes), tools, {n: s.profile for n, s in nodes.items()}, options)
    cut = [r for r in outcome.runs if r.node == "q1" and r.error]
    assert cut
    assert not any(r.hung for r in outcome.runs)
    assert all("budget" in (r.error or "") for r in cut), [r.error for r in cut]
    assert not [f for f in outcome.judgement.findings.get("q1", [])
                if f.status is Status.FAIL], outcome.judgement.findings.get("q1")
