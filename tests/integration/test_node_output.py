"""The node report as a person and a script read it: the verdict and the
problems first, passes folded per check, skips one line per reason, a healthy DGX H100
within 60 lines piped, ``--all`` for every finding, ``--format line`` in one line; and the
same in a real terminal (tmux) at 80 and 200 columns."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

FAULTY = ("nodes:\n  - {names: n1, profile: dgx-h100}\n"
          "faults:\n  - {node: n1, kind: nvlink_down, gpu: 3, link: 7}\n"
          "  - {node: n1, kind: gpu_lost, gpu: 0}\n")


@pytest.fixture
def faulty(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(FAULTY)
    return spec


def _findings(*args: str) -> list[dict[str, object]]:
    proc = run_cli("run", *args, "--format", "json")
    findings: list[dict[str, object]] = json.loads(proc.stdout)["findings"]
    return findings


def test_healthy_dgx_h100_fits_a_screen_with_passes_folded() -> None:
    proc = run_cli("run", "--simulate", "dgx-h100")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 60, proc.stdout
    assert lines[0] == "dgx-h100-sim: READY"
    assert max(len(line) for line in lines) <= 80
    assert re.search(r"\bgpu\.ecc_mode 8/8 GPUs\b", proc.stdout)
    assert re.search(r"\bnvlink\.links_up 8/8 GPUs\b", proc.stdout)
    # every check with a pass is named once; every skip reason has one line of its own
    findings = _findings("--simulate", "dgx-h100")
    passed = {str(f["check"]) for f in findings if f["status"] == "pass"}
    for check in passed:
        assert len(re.findall(rf"(?<![\w.]){re.escape(check)}(?![\w.])",
                              proc.stdout.split("  SKIP")[0])) == 1, check
    reasons = {str(f["message"]) for f in findings if f["status"] == "skip"}
    skip_lines = [line for line in lines if line.startswith("  SKIP  ")]
    assert len(skip_lines) <= len(reasons)
    for reason in reasons:
        assert sum(reason.split()[0] in line for line in skip_lines) >= 1, reason


def test_problems_come_first_with_their_detail(faulty: Path) -> None:
    proc = run_cli("run", "--simulate", str(faulty))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0] == "n1: NOT READY"
    rows = [line for line in lines[4:] if not line.startswith(" " * 8)]  # wrapped rows' rest
    statuses = [line.split()[0] for line in rows]
    first_pass = statuses.index("PASS")
    assert set(statuses[:first_pass]) == {"FAIL"}, proc.stdout
    problems = proc.stdout[:proc.stdout.index("  PASS")]
    assert "nvlink.links_up          gpu3" in problems
    assert "observed=17/18" in problems
    # six pass; gpu3 fails; the lost gpu0 cannot be asked (a skip naming why)
    assert "nvlink.links_up 6/8 GPUs" in proc.stdout


def test_all_lists_every_finding(faulty: Path) -> None:
    proc = run_cli("run", "--simulate", str(faulty), "--all")
    rows = [line for line in proc.stdout.splitlines()
            if line[:7].strip() in ("FAIL", "ERROR", "WARN", "PASS", "SKIP")]
    assert len(rows) == len(_findings("--simulate", str(faulty)))


def test_line_format_is_one_line_with_the_exit_code(faulty: Path) -> None:
    healthy = run_cli("run", "--simulate", "dgx-h100", "--format", "line")
    assert (healthy.returncode, healthy.stdout) == (0, "READY\n")
    bad = run_cli("run", "--simulate", str(faulty), "--format", "line", "--max-bytes", "4096")
    assert bad.returncode == 1
    assert bad.stdout.count("\n") == 1
    assert bad.stdout.startswith("NOT READY: ")
    assert "nvlink.links_up gpu3 17/18" in bad.stdout
    assert "gpu.responsive gpu0 GpuIsLost" in bad.stdout  # the lost GPU, in the same line


def test_line_format_fits_node_problem_detector_by_default(tmp_path: Path) -> None:
    """Three faults fit NPD's default max_output_length (80 bytes, the newline trimmed);
    what does not fit is counted, and --max-bytes gives room for all of them."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(FAULTY + "  - {node: n1, kind: ib_port_down, hca: mlx5_0, port: 1}\n")
    short = run_cli("run", "--simulate", str(spec), "--format", "line")
    assert short.returncode == 1
    assert short.stdout == "NOT READY: gpu.responsive gpu0 GpuIsLost; +2 more\n"
    wide = run_cli("run", "--simulate", str(spec), "--format", "line", "--max-bytes", "200")
    assert wide.stdout.count(";") == 2
    assert len(wide.stdout.encode()) > 81


def test_max_bytes_without_the_line_format_is_a_usage_error() -> None:
    proc = run_cli("run", "--simulate", "dgx-h100", "--max-bytes", "100")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == ("clusterdiag: --max-bytes applies to --format line, "
                           "not --format table\n")


def test_cluster_line_names_the_nodes_to_exclude(tmp_path: Path) -> None:
    reports = []
    for name, spec in (("ok", "dgx-h100"), ("bad", None)):
        if spec is None:
            spec_file = tmp_path / "bad.yaml"
            spec_file.write_text(FAULTY.replace("n1", "gpu002"))
            spec = str(spec_file)
        out = tmp_path / f"{name}.json"
        run_cli("run", "--simulate", spec, "--format", "json", "--output", str(out))
        reports.append(str(out))
    proc = run_cli("report", "merge", *reports, "--format", "line")
    assert proc.returncode == 1
    assert proc.stdout.count("\n") == 1
    assert proc.stdout.startswith("NOT READY 1/2 nodes, exclude gpu002: ")


def _tmux_screen(command: str, width: int, height: int = 200) -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux not installed")
    session = f"cd{width}x{time.monotonic_ns() % 10**8}"
    done = f"/tmp/{session}.done"
    subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", str(width), "-y",
                    str(height), f"{command}; touch {done}; sleep 60"], check=True)
    try:
        deadline = time.monotonic() + 120
        while not Path(done).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Path(done).exists(), "the command did not finish in the terminal"
        return subprocess.run([tmux, "capture-pane", "-p", "-J", "-t", session, "-S", "-"],
                              capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], check=False)
        Path(done).unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 200])
def test_in_a_real_terminal_the_verdict_leads_and_nothing_overflows(width: int) -> None:
    command = shlex.join([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                          "dgx-h100"])
    screen = [line for line in _tmux_screen(command, width).splitlines() if line.strip()]
    assert screen[0].startswith("dgx-h100-sim: READY"), screen[:3]
    assert len(screen) <= 60
    assert max(len(line) for line in screen) <= width
    assert any("gpu.ecc_mode 8/8 GPUs" in line for line in screen)
    if width == 200:  # wider terminal, more folded checks per line
        assert len(screen) < 40


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 200])
def test_demo_says_first_that_it_is_a_simulation_and_cuts_no_id(width: int) -> None:
    command = shlex.join([sys.executable, "-m", "clusterdiag.agent", "demo"])
    screen = [line for line in _tmux_screen(command, width).splitlines() if line.strip()]
    assert screen[0].startswith("DEMO: a simulated cluster"), screen[:2]
    assert "planted fault" in screen[0]
    assert max(len(line) for line in screen) <= width
    words = {word.strip("(),:") for line in screen for word in line.split()}
    # the demo's planted problems: each check id and each node set whole on one line
    for whole in ("cluster.nvl_domain", "cluster.reachability", "cluster.versions",
                  "nvlink.links_up", "ib.rate", "gpu003", "gpu007", "gpu016", "nvl1-tray05"):
        assert whole in words, (whole, screen)


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 200])
def test_topo_in_a_real_terminal_keeps_every_label_and_class_whole(width: int) -> None:
    command = shlex.join([sys.executable, "-m", "clusterdiag.agent", "topo", "--simulate",
                          "dgx-h100"])
    screen = _tmux_screen(command, width)
    lines = screen.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in screen
    headers = [line.split() for line in lines if (line.startswith(" ") and "GPU" in line)
               or (line.startswith(" ") and "NIC" in line)]
    shown_labels = {word for header in headers for word in header}
    for label in [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(12)]:
        assert label in shown_labels, label
    gpu0 = [line.split() for line in lines if line.startswith("GPU0 ")]
    assert gpu0[0][1:3] == ["X", "NV18"]
    assert "NIC Legend:" in screen
    assert "NIC0: mlx5_0" in screen
