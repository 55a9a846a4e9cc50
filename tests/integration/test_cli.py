"""The real command in a subprocess: exit codes 0/1/2/3 and no traceback for users."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import REPO, run_cli

SCHEMA = json.loads((REPO / "reports/schema/node-report.v1.json").read_text())


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr


def test_healthy_simulated_node_exits_0_and_report_validates() -> None:
    proc = run_cli("run", "--simulate", "dgx-h100", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["verdict"] in ("pass", "warn")
    assert report["profile"] == {"name": "dgx-h100", "auto_detected": True,
                                 "reason": report["profile"]["reason"], "provisional": False}
    assert len(report["inventory"]["gpus"]) == 8


def test_a_fail_exits_1(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: gpu_lost, gpu: 2}\n")
    proc = run_cli("run", "--simulate", str(spec), "--format", "json")
    assert proc.returncode == 1, proc.stdout
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    fails = [f for f in report["findings"] if f["status"] == "fail"]
    assert any(f["check"] == "gpu.responsive" and f["component"] == "gpu2" for f in fails)


@pytest.mark.parametrize(("args", "needle"), [
    (("run", "--config", "/nonexistent/config.yaml"), "no such file"),
    (("run", "--profile", "dgx-h999"), "unknown profile 'dgx-h999'; known:"),
    (("run", "--simulate", "nonsense"), "neither a profile"),
    (("run", "--level", "slow"), "Invalid value for '--level'"),
    (("checks", "explain", "gpu.nope"), "unknown check"),
    (("profiles", "show", "nope"), "unknown profile"),
    (("agent", "--listen", "0.0.0.0:9464"), "refusing to listen on 0.0.0.0:9464"),
    (("demo", "--spec", "/nonexistent/spec.yaml"), "--spec /nonexistent/spec.yaml: no such file"),
])
def test_usage_and_config_errors_exit_2_in_one_line(args: tuple[str, ...], needle: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert needle in proc.stderr
    _no_traceback(proc)


def test_bad_config_value_names_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("prolog:\n  budget_s: forever\n")
    proc = run_cli("run", "--config", str(config))
    assert proc.returncode == 2
    assert str(config) in proc.stderr
    assert "prolog.budget_s" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    _no_traceback(proc)


def test_spec_naming_a_gpu_the_node_lacks_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: 'n[1-2]', profile: gb200-nvl72}\n"
                    "faults:\n  - {node: n2, kind: gpu_lost, gpu: 4}\n")
    proc = run_cli("run", "--simulate", str(spec))
    assert proc.returncode == 2
    assert "n2 has no GPU 4" in proc.stderr
    _no_traceback(proc)


def test_a_spec_of_several_nodes_says_which_one_it_checks(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: 'n[1-3]', profile: dgx-h100}\n"
                    "faults:\n  - {node: n3, kind: gpu_lost, gpu: 1}\n")
    proc = run_cli("run", "--simulate", str(spec), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["node"] == "n1"
    assert proc.stderr.splitlines() == [
        f"clusterdiag: --simulate {spec}: checking n1, the first of its 3 nodes; "
        "--node NAME checks another"]
    picked = run_cli("run", "--simulate", str(spec), "--node", "n3", "--format", "json")
    assert picked.returncode == 1
    assert picked.stderr == ""


def test_unknown_fault_kind_and_key_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: gpu_lost, gpu: 1, colour: red}\n")
    proc = run_cli("run", "--simulate", str(spec))
    assert proc.returncode == 2
    assert "unknown key 'colour'" in proc.stderr
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: gpu_on_fire}\n")
    proc = run_cli("run", "--simulate", str(spec))
    assert proc.returncode == 2
    assert "unknown fault kind 'gpu_on_fire'" in proc.stderr


def test_unreadable_root_exits_3() -> None:
    proc = run_cli("run", "--root", "/nonexistent/tree")
    assert proc.returncode == 3
    assert "--root" in proc.stderr
    _no_traceback(proc)


def test_this_machine_without_gpu_exits_0_and_skips_gpu_families() -> None:
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver")
    proc = run_cli("run", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    gpu_side = [f for f in report["findings"]
                if f["check"].split(".")[0] in ("gpu", "nvlink", "fabric", "nvswitch")]
    assert gpu_side, "the GPU families must report, not vanish"
    for finding in gpu_side:
        assert finding["status"] == "skip", finding
    responsive = next(f for f in gpu_side if f["check"] == "gpu.responsive")
    assert "no NVIDIA GPU" in responsive["message"]


def test_checks_list_and_explain() -> None:
    listing = run_cli("checks", "list")
    assert listing.returncode == 0
    assert "host.disk" in listing.stdout
    explain = run_cli("checks", "explain", "host.disk")
    assert explain.returncode == 0
    assert "remedy:" in explain.stdout
    assert "min_free_pct" in explain.stdout
    assert re.search(r"^defined at: checks/[\w/]+\.py:\d+$", explain.stdout, re.M), explain.stdout


def test_explain_names_the_line_that_registers_each_check() -> None:
    from clusterdiag import checks
    from clusterdiag.agent.cli.checks import defined_at

    for spec in checks.REGISTRY.values():
        where, line = defined_at(spec.func).rsplit(":", 1)
        assert where.startswith("checks/"), where
        text = (REPO / where).read_text().splitlines()[int(line) - 1]
        assert text.startswith(f'@check("{spec.id}"'), (spec.id, where, line, text)


@pytest.mark.parametrize(("check_id", "room"), [
    ("gpu.ecc_mode", "checks/gpu/memory.py"), ("gpu.xid", "checks/gpu/xid.py"),
    ("nvlink.links_up", "checks/nvlink/links.py"),
    ("nvlink.remote", "checks/nvlink/topology.py"),
    ("nvswitch.sxid", "checks/nvswitch/switches.py"), ("host.profile", "checks/host/profile.py"),
    ("host.disk", "checks/host/storage.py"), ("host.pcie_aer", "checks/host/pcie.py"),
    ("ib.port_state", "checks/ib/ports.py"), ("ib.error_rate", "checks/ib/counters.py"),
    ("roce.pfc", "checks/ib/roce.py"), ("fabric.imex", "checks/fabric/imex.py"),
    ("fabric.health_mask", "checks/fabric/health.py"), ("nccl.env", "checks/nccl/env.py"),
    ("nccl.acs", "checks/nccl/pcie.py")])
def test_explain_names_the_room_of_a_check_in_a_family_package(check_id: str,
                                                              room: str) -> None:
    explain = run_cli("checks", "explain", check_id)
    assert explain.returncode == 0, explain.stderr
    (line,) = [x for x in explain.stdout.splitlines() if x.startswith("defined at: ")]
    where, number = line.removeprefix("defined at: ").rsplit(":", 1)
    assert where == room
    assert (REPO / where).read_text().splitlines()[int(number) - 1].startswith(
        f'@check("{check_id}"')


def test_the_catalog_lists_and_explains_cluster_checks_too() -> None:
    from clusterdiag.reports.cluster_checks import CATALOG

    listing = run_cli("checks", "list").stdout.splitlines()
    cluster_lines = [line for line in listing if line.startswith("cluster.")]
    assert [line.split()[0] for line in cluster_lines] == list(CATALOG)
    assert all(line.split()[1] == "cluster" for line in cluster_lines)
    explain = run_cli("checks", "explain", "cluster.ib_rails")
    assert explain.returncode == 0
    assert explain.stdout.startswith("cluster.ib_rails: ")
    assert "runs in: cluster reports" in explain.stdout
    where, line = explain.stdout.splitlines()[-1].removeprefix("defined at: ").rsplit(":", 1)
    assert where == "reports/cluster_checks/ib_rails.py"
    assert (REPO / where).read_text().splitlines()[int(line) - 1].startswith("def ib_rails(")


def test_profiles_list_and_show() -> None:
    listing = run_cli("profiles", "list")
    for name in ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "gb300-nvl72",
                 "hgx-h100-pcie", "generic"):
        assert name in listing.stdout
    shown = run_cli("profiles", "show", "dgx-h100")
    assert "nvlinks_per_gpu: 18" in shown.stdout


def test_table_is_plain_when_piped_and_failures_come_first(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: gpu_lost, gpu: 0}\n")
    proc = run_cli("run", "--simulate", str(spec))
    assert "\x1b[" not in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("  ")
             and line.split()[0] in ("FAIL", "PASS", "SKIP", "WARN", "ERROR")]
    statuses = [line.split()[0] for line in lines]
    assert statuses[0] == "FAIL"
    assert statuses.index("PASS") > max(i for i, s in enumerate(statuses) if s == "FAIL")
    assert proc.stdout.splitlines()[0].startswith("n1: NOT READY")


def test_hung_gpu_cannot_hang_the_command(tmp_path: Path) -> None:
    """The simulated hang blocks forever and ignores SIGTERM: the command must still return
    within its budget, close its pipes (EOF), and leave nothing holding them."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: gpu_hang, gpu: 5}\n")
    budget = 4.0
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "run", "--simulate", str(spec),
         "--budget", str(budget), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    chunks: dict[int, bytes] = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}
    open_fds = set(chunks)
    while open_fds and time.monotonic() - started < budget + 60:
        ready, _, _ = select.select(list(open_fds), [], [], 0.5)
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd] += data
            else:
                open_fds.discard(fd)
    elapsed = time.monotonic() - started
    assert not open_fds, "output pipes still open: something left behind holds them"
    assert proc.wait(timeout=30) == 1
    # a hang is forever; the margin is for interpreter start-up on a loaded machine
    assert elapsed < budget + 30, elapsed
    report = json.loads(chunks[proc.stdout.fileno()])
    hung = [f for f in report["findings"] if f["check"] == "gpu.responsive"
            and f["status"] == "fail"]
    assert [f["component"] for f in hung] == ["gpu5"]
    assert hung[0]["action"] == "reboot"
    # The other seven GPUs still answered and were judged.
    passes = {f["component"] for f in report["findings"] if f["check"] == "gpu.responsive"
              and f["status"] == "pass"}
    assert passes == {f"gpu{i}" for i in range(8) if i != 5}


def test_snapshot_lists_every_kernel_log_line_and_run_judges_the_window(tmp_path: Path
                                                                        ) -> None:
    old = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 30 * 86400))
    xid = "NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus."
    log = tmp_path / "kern.log"
    log.write_text(f"{old} {xid}\n[  10.000000] {xid}\n")
    proc = run_cli("snapshot", "--simulate", "dgx-h100", "--kernel-log", str(log))
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads(proc.stdout)["kernel_log"]
    assert (len(kernel["xids"]), kernel["dropped"]) == (2, 0)  # docs/design.md §8: every line
    proc = run_cli("run", "--simulate", "dgx-h100", "--kernel-log", str(log), "--format",
                   "json", "--checks", "gpu.xid")
    findings = json.loads(proc.stdout)["findings"]
    # The month-old line is outside the window; the undated one after it takes its time
    # (never "now"): neither is recent.
    assert not any(f["status"] == "fail" for f in findings), findings
    recent = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 600))
    log.write_text(f"{old} {xid}\n{recent} {xid}\n")
    proc = run_cli("run", "--simulate", "dgx-h100", "--kernel-log", str(log), "--format",
                   "json", "--checks", "gpu.xid")
    findings = json.loads(proc.stdout)["findings"]
    assert any(f["status"] == "fail" and f["check"] == "gpu.xid" for f in findings), findings
