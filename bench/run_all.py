"""Every benchmark of the project, one table: each figure, its goal, and its ratio to this
machine's own baseline measured in the same run.

    .venv/bin/python bench/run_all.py [--quick]

Each script in BENCHES runs in its own process with ``--json`` (see bench/common.py) so
one benchmark's memory or threads never colour the next one's figures. ``--quick`` passes
``--quick`` on to the scripts that accept it (smaller sizes, for a smoke run). One plain
(non-editable) install of this checkout is made first and handed to the scripts that time
the installed commands (``$CLUSTERDIAG_BENCH_INSTALL``); each script prints which code it
measured, and run_all prints those lines. A script that exits non-zero (it checks that
what it timed succeeded) is listed and makes run_all exit 1.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import INSTALL_ENV, Figure, make_install, python_start_s, table

HERE = Path(__file__).resolve().parent
# name -> accepts --quick
BENCHES: dict[str, bool] = {
    "nvml_calls.py": False,
    "merge_scale.py": True,
    "gather_scale.py": True,
    "ib_collect.py": False,
    "kernel_log_parse.py": False,
    "prolog_time.py": False,
    "agent_load.py": True,
    "agent_http_load.py": True,
    "qualify_schedule.py": True,
}


def run_one(script: str, quick: bool, env: dict[str, str]) -> tuple[list[Figure], str | None]:
    argv = [sys.executable, str(HERE / script), "--json"]
    if quick and BENCHES[script]:
        argv.append("--quick")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=HERE,
                          env=env)
    for line in proc.stderr.splitlines():
        if line.startswith(("measured:", "NHC not on PATH")):
            print(f"# {script}: {line}")
    figures = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            figures.append(Figure(**json.loads(line)))
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return figures, f"{script} exited {proc.returncode}: {tail}"
    return figures, None


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    started = time.time()
    print(f"# clusterdiag benchmarks, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
          f"{platform.machine()}, {platform.python_version()}, "
          f"{len(os.sched_getaffinity(0))} CPUs")
    baseline = python_start_s()
    figures = [Figure("python3 -c pass (baseline)", round(baseline * 1000, 1), "ms")]
    problems = []
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-install-"))
    try:
        install = make_install(work / "venv")
        env = {**os.environ, INSTALL_ENV: str(install.prefix)}
        results = [run_one(script, quick, env) for script in BENCHES]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for got, problem in results:
        figures.extend(f for f in got if not f.name.startswith("python3 -c pass"))
        if problem:
            problems.append(problem)
    print(table(figures))
    for problem in problems:
        print(f"! {problem}")
    print(f"# total {time.time() - started:.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
