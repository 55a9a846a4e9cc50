"""The cluster commands as users run them: ``report merge`` over saved files (bad ones are
findings, never exit 2), the single-node report in the cluster formats, node-set input
and the one-line usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("reports")
    for name, faults in (("gpu001", ""), ("gpu002", ""), ("gpu003", "nvlink")):
        spec = directory / f"{name}.yaml"
        fault = (f"faults:\n  - {{node: {name}, kind: nvlink_down, gpu: 3, link: 7}}\n"
                 if faults else "")
        spec.write_text(f"nodes:\n  - names: {name}\n    profile: dgx-h100\n{fault}")
        proc = run_cli("run", "--simulate", str(spec), "--format", "json", "--output",
                       str(directory / f"{name}.json"))
        assert proc.returncode in (0, 1), proc.stderr
        spec.unlink()
    (directory / "broken.json").write_text('{"schema": "clusterdiag/node-report/v1", "node"')
    return directory


def test_report_merge_goes_on_past_a_bad_file(saved: Path, tmp_path: Path) -> None:
    exclude = tmp_path / "exclude"
    proc = run_cli("report", "merge", str(saved), str(tmp_path / "absent.json"),
                   "--exclude-file", str(exclude))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0] == "NOT READY: 2 of 3 nodes ready, 16 of 24 GPUs"
    assert "file is not JSON" in proc.stdout
    assert "cannot read file (No such file or directory)" in proc.stdout
    assert exclude.read_text() == "gpu003\n"
    assert proc.stderr == ""


def test_report_merge_formats_and_need(saved: Path, tmp_path: Path) -> None:
    files = [str(saved / f"gpu00{i}.json") for i in (1, 2, 3)]
    proc = run_cli("report", "merge", *files, "--format", "json", "--need", "2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ready"] is True
    assert data["bad_nodes"] == "gpu003"
    capacity = [f for f in data["cluster_findings"] if f["check"] == "cluster.capacity"]
    assert capacity[0]["observed"]["on"] == "gpu[001-002]"
    page = tmp_path / "r.html"
    proc = run_cli("report", "merge", *files, "--format", "html", "--output", str(page))
    assert proc.returncode == 1
    assert "<h1>NOT READY</h1>" in page.read_text()
    proc = run_cli("report", "merge", *files, "--format", "md")
    assert "sbatch --exclude=gpu003" in proc.stdout


def test_single_node_renders_in_the_cluster_formats(tmp_path: Path) -> None:
    exclude = tmp_path / "exclude"
    proc = run_cli("run", "--simulate", "dgx-h100", "--format", "md", "--exclude-file",
                   str(exclude))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# Cluster report: READY: 1 of 1 nodes ready, 8 of 8 GPUs")
    assert exclude.read_text() == ""


@pytest.mark.parametrize(("args", "message"), [
    (["--via", "local", "--nodes", "n1"], "--via local checks this node only"),
    (["--via", "agent"], "--via agent: needs --nodes"),
    (["--nodes", "gpu[1-"], "--nodes: bad node set 'gpu[1-'"),
    (["--nodes", "n[1-2]", "--level", "full"], "--level: agents report at their own"),
    (["--nodes", "n1", "--simulate", "dgx-h100"], "--simulate reads one node"),
])
def test_cluster_usage_errors_are_one_line(args: list[str], message: str) -> None:
    proc = run_cli("run", *args, env={"SLURM_JOB_NODELIST": ""})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("clusterdiag: ")
    assert message in lines[0]


def test_nodes_from_a_file_and_from_the_allocation(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: n[1-4]\n    profile: dgx-h100\n")
    command = (f"{sys.executable} -m clusterdiag.agent run --simulate {spec} --node %h "
               "--format json")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"cluster": {"ssh_worker": "exec",
                                              "remote_command": command}}))
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("n[1-2]\nn3\n")
    proc = run_cli("run", "--nodes", str(nodes), "--via", "ssh", "--config", str(config),
                   "--format", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [n["node"] for n in json.loads(proc.stdout)["nodes"]] == ["n1", "n2", "n3"]
    proc = run_cli("run", "--via", "ssh", "--config", str(config), "--format", "json",
                   env={"SLURM_JOB_NODELIST": "n[3-4]"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [n["node"] for n in json.loads(proc.stdout)["nodes"]] == ["n3", "n4"]


def test_no_progress_bar_when_stderr_is_not_a_terminal() -> None:
    from clusterdiag.agent.cluster.progress import Progress

    progress = Progress(1000, "gathering")
    assert progress.__enter__() is None
    progress.__exit__(None, None, None)


def test_nodes_are_judged_against_slurms_blocks(tmp_path: Path) -> None:
    """``run --nodes`` asks scontrol for Slurm's blocks and names the tray whose NVLink
    partition is not its block's: a cluster finding for --exclude, exit 1."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: 'r1-tray[01-02]', profile: gb200-nvl72, rack: r1}\n"
                    "  - {names: r2-tray01, profile: gb200-nvl72, rack: r2}\n")
    command = (f"{sys.executable} -m clusterdiag.agent run --simulate {spec} --node %h "
               "--format json")
    scontrol = tmp_path / "scontrol"  # the block plugin's lines (tests/fixtures/slurm)
    scontrol.write_text("#!/bin/sh\necho 'BlockName=b1 BlockIndex=0 "
                        "Nodes=r1-tray[01-02],r2-tray01 BlockSize=3'\n")
    scontrol.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"prolog": {"scontrol": str(scontrol)},
                                  "cluster": {"ssh_worker": "exec", "remote_command": command,
                                              "expected_trays_per_rack": 1}}))
    proc = run_cli("run", "--nodes", "r1-tray[01-02],r2-tray01", "--via", "ssh", "--config",
                   str(config), "--format", "json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    bad = [f for f in report["cluster_findings"] if f["status"] in ("fail", "error", "warn")]
    assert [(f["check"], f["component"], f["nodes"]) for f in bad] == [
        ("cluster.nvl_blocks", "block b1", "r2-tray01")]
    assert report["bad_nodes"] == "r2-tray01"
