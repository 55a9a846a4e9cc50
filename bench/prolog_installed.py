"""Wall time of ``clusterdiag prolog`` started from the installed form (the offline bundle,
installed into a scratch prefix) against the development venv (the editable install),
on the same interpreter and the same node, alternating run by run so that load on the
machine falls on both alike.

    .venv/bin/python bench/prolog_installed.py [--json] [--runs N] [--bundle FILE]

Without ``--bundle`` it builds one for this Python with ``deploy/bundle/build.py`` (which
needs the package index). The node is a simulated dgx-h100 tree read through ``--root``
with the real pynvml, with a fresh agent report (the prolog passes) and without one (it
collects the node itself, and with no NVIDIA driver here gpu.responsive fails: exit 1).
The prolog runs as Slurm runs it (no PATH, SLURMD_NODENAME and the job's variables);
every timed run must end with the verdict its case expects, or no figure is printed.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from common import Figure, emit

from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec

REPO = Path(__file__).resolve().parents[1]
NODE = "bench-node"
ENV = {"SLURMD_NODENAME": NODE, "SLURM_JOB_ID": "1", "SLURM_JOB_USER": "bench"}


def _option(name: str, default: str | None) -> str | None:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args else default


def _bundle(work: Path) -> Path:
    given = _option("--bundle", None)
    if given:
        return Path(given)
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    proc = subprocess.run([sys.executable, str(REPO / "deploy/bundle/build.py"), "--python",
                           minor, "--out", str(work / "dist")], capture_output=True,
                          text=True, check=True)
    return Path(proc.stdout.split()[0])


def _install(bundle: Path, work: Path) -> Path:
    """The bundle installed under ``work`` on this very interpreter; returns its program."""
    with tarfile.open(bundle) as tar:
        tar.extractall(work / "unpacked", filter="data")
    (top,) = (work / "unpacked").iterdir()
    prefix = work / "installed"
    subprocess.run([str(top / "install.sh"), "--prefix", str(prefix / "opt"), "--bin-dir",
                    str(prefix / "bin"), "--config-dir", str(prefix / "etc"), "--unit-dir",
                    str(prefix / "units"), "--no-slurm", "--no-user"], check=True,
                   capture_output=True, env={"CLUSTERDIAG_PYTHON": sys._base_executable,
                                             "PATH": "/usr/bin:/bin"})
    return prefix / "bin" / "clusterdiag"


def _fresh_report(state: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                           "dgx-h100", "--format", "json"], capture_output=True, text=True,
                          check=False)
    report = json.loads(proc.stdout)
    report["node"] = NODE
    (state / "report.json").write_text(json.dumps(report))
    (state / "agent.json").write_text(json.dumps(
        {"interval_s": 3600, "pid": 1, "listen": "127.0.0.1:9464"}))


# What each case must end with: the exit code and the prolog's verdict line.
EXPECTED = {"with": (0, "clusterdiag prolog: pass"),
            "without": (1, "clusterdiag prolog: FAIL node not ready")}


def _timed(argv: list[str], case: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=ENV)
    wall = time.perf_counter() - started
    code, line = EXPECTED[case]
    if proc.returncode != code or line not in proc.stderr:
        raise SystemExit(f"prolog {case} a report ({argv[0]}): exit {proc.returncode}, "
                         f"expected {code} and {line!r}\n" + proc.stderr[-2000:])
    return wall


def main() -> None:
    runs = int(_option("--runs", "9") or 9)
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-installed-"))
    try:
        installed = _install(_bundle(work), work)
        dev = Path(sys.executable).parent / "clusterdiag"
        root = make_root(build(NodeSpec(NODE, "dgx-h100")))
        figures = []
        for case in ("with", "without"):
            state = work / case
            state.mkdir()
            if case == "with":
                _fresh_report(state)
            config = work / f"{case}.yaml"
            config.write_text(json.dumps({"agent": {"state_dir": str(state)},
                                          "prolog": {"drain": False}}))
            times: dict[str, list[float]] = {"installed": [], "dev venv": []}
            for _ in range(runs):
                for form, program in (("installed", installed), ("dev venv", dev)):
                    times[form].append(_timed([str(program), "prolog", "--root", str(root),
                                               "--config", str(config)], case))
            dev_s = statistics.median(times["dev venv"])
            for form, samples in times.items():
                wall = statistics.median(samples)
                figures.append(Figure(f"prolog {case} a fresh agent report, {form}",
                                      round(wall * 1000, 1), "ms", goal="installed <= dev venv",
                                      baseline="dev venv", ratio=wall / dev_s))
        emit(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
