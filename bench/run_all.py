"""Every benchmark of the project, one table: each figure, its goal, and its ratio to this
machine's own baseline measured in the same run.

    .venv/bin/python bench/run_all.py [--quick] [--write-docs]

Each script in BENCHES runs in its own process with ``--json`` (see bench/common.py) so
one benchmark's memory or threads never colour the next one's figures. ``--quick`` passes
``--quick`` on to the scripts that accept it (smaller sizes, for a smoke run). One plain
(non-editable) install of this checkout is made first and handed to the scripts that time
the installed commands (``$CLUSTERDIAG_BENCH_INSTALL``); each script prints which code it
measured, and run_all prints those lines. A script that exits non-zero (it checks that
what it timed succeeded) is listed and makes run_all exit 1.

After the whole table it prints the goals table: each figure that has a goal beside the
anchor measured in the same run, the date and the machine's load average over the run
(other work on the machine slows figures and anchors alike; the ratios are what the runs,
alternating with their anchors, compare). ``--write-docs`` writes docs/benchmarks.md (the
command, the date, the goals table and every figure), unless a script failed.
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
    "agent_flood.py": True,
    "qualify_schedule.py": True,
    "qualify_report.py": True,
    "rts_week.py": True,
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


DOCS = HERE.parent / "docs" / "benchmarks.md"
# The goals table's rows: the row's words, and how its figure (and the anchor, when the
# anchor is a figure of its own) is found by the start of its name in this run's figures;
# after a "~", words the name holds further on; after a "|", the start of the figure's
# baseline where two figures share a name.
GOAL_ROWS: tuple[tuple[str, str, str], ...] = (
    ("prolog with a fresh agent report, `--root` of a prebuilt dgx-h100 tree, plain install",
     "prolog --root (prebuilt dgx-h100 tree), with a fresh agent report",
     "python3 -c pass (this install's interpreter)"),
    ("prolog as on a real node: YAML config, the unprivileged agent's report (nccl.acs "
     "skipped), nccl.acs and gpu.processes re-run, nccl.acs's record standing, same tree",
     "prolog --root (prebuilt dgx-h100 tree), YAML config, the unprivileged agent's report:",
     "python3 -c pass (this install's interpreter)"),
    ("same, the first job after the bus changed: nccl.acs judged again (lean path)",
     "prolog --root (prebuilt dgx-h100 tree), YAML config, the unprivileged agent's report,",
     "python3 -c pass (this install's interpreter)"),
    ("prolog with no agent report, same tree",
     "prolog --root (prebuilt dgx-h100 tree), without a fresh agent report",
     "python3 -c pass (this install's interpreter)"),
    ("prolog with no agent report / LBNL NHC (recorded: not installable here)",
     "prolog without a report vs NHC", ""),
    ("least a Python prolog can cost: start, read the report and the files the prolog "
     "without one reads", "least a Python prolog can cost here",
     "python3 -c pass (this install's interpreter)"),
    ("NVML calls per GPU, one snapshot of a simulated dgx-h100", "nvml calls per GPU, dgx-h100",
     ""),
    ("`report merge` of 10,000 DGX H100 node reports, vs a serial bare `json.load` of the "
     "same files", "merge 10,000 node reports", "merge 10,000: serial bare json.load"),
    ("same, peak RSS", "merge 10,000: peak RSS, merging process", ""),
    ("gather from 1,000 loopback agents, vs bare aiohttp GETs + `json.loads` at the same "
     "concurrency and token", "gather 1,000 agents over HTTP", "gather 1,000: bare aiohttp"),
    ("same, 10,000 agents", "gather 10,000 agents over HTTP", "gather 10,000: bare aiohttp"),
    ("InfiniBand collection, real H100 tree, vs node_exporter's infiniband collector",
     "ib collect, real H100 tree|node_exporter's",
     "node_exporter ~infiniband collector, real H100"),
    ("same, vs the node_exporter-equivalent reader (runs anywhere)",
     "ib collect, real H100 tree|node_exporter-equivalent",
     "node_exporter-equivalent reader, real H100"),
    ("kernel log of 1,000,000 lines of real GPU-node noise, 2 h window, vs a minimal parser",
     "1,000,000-line real-noise log: clusterdiag judging path",
     "1,000,000-line real-noise log: minimal single-regex parser"),
    ("same, peak RSS", "1,000,000-line real-noise log: clusterdiag peak RSS", ""),
    ("kernel log of 1,000,000 Xid lines, 2 h window, vs a minimal parser",
     "1,000,000-line all-Xid log: clusterdiag judging path",
     "1,000,000-line all-Xid log: minimal single-regex parser"),
    ("same, peak RSS", "1,000,000-line all-Xid log: clusterdiag peak RSS", ""),
    ("agent idle CPU, real host path, default 30 s interval, vs node_exporter",
     "agent CPU idle (real host path", "node_exporter ~CPU"),
    ("agent idle CPU, `--simulate` (the simulator's work counted)",
     "agent CPU idle (--simulate", "node_exporter ~CPU"),
    ("agent RSS, real host path", "agent RSS peak (real host path",
     "node_exporter RSS peak"),
    ("agent RSS after an hour of collections (120 at 30 s, run at 1 s), real host path",
     "agent RSS after", "node_exporter RSS peak"),
    ("same, growth over the second half of the hour (a leak shows here)",
     "agent RSS slope over", ""),
    ("the agent's server alone: python3 with aiohttp.web imported without aiohttp's client",
     "python3 with the agent's server imported", "python3 with aiohttp.web imported"),
    ("agent during an XID storm of 8 events/s", "agent CPU during an XID storm", ""),
    ("agent /healthz under a flood: 1,100 addresses x 1 idle connection, plain HTTP",
     "/healthz answered within 1 s (1,100 addresses x 1 idle connection, plain", ""),
    ("same, TLS", "/healthz answered within 1 s (1,100 addresses x 1 idle connection, TLS",
     ""),
    ("qualify at 1,024 simulated nodes: clusterdiag's own overhead, % of the schedule",
     "1,024 nodes: clusterdiag's overhead", ""),
    ("qualify: clusterdiag CPU time growth from 128 to 1,024 nodes (exponent)",
     "clusterdiag CPU time growth 128 -> 1,024", ""),
    ("qualify report of 1,024 nodes: HTML size", "qualify report, 1,024 nodes: HTML size",
     ""),
    ("return to service, a simulated week of 64 nodes: longest out after a fault cleared",
     "rts week~longest out after the fault cleared", ""),
    ("same, the flapping NVLink: held for repair at its own drain no.",
     "rts week~gpu02 (flapping) held", ""),
    ("same, the flapping IB port (its third drain read alone was a fleet event's first)",
     "rts week~gpu03 (flapping) held", ""),
    ("same, strikes counted from a fleet event on 20 of 64 nodes",
     "rts week~strikes from the fleet event", ""),
    ("same, the slow GPU resumed without a passing validation",
     "rts week~slow GPU resumed", ""),
)


def _find(figures: list[Figure], prefix: str) -> Figure | None:
    named, _, baseline = prefix.partition("|")
    name, _, inside = named.partition("~")
    for f in figures:
        if f.name.startswith(name) and inside in f.name and f.baseline.startswith(baseline):
            return f
    return None


def _value(f: Figure) -> str:
    return f"{f.value:g} {f.unit}".strip()


def goals_table(figures: list[Figure]) -> list[str]:
    """The goal rows as Markdown: figure, anchor, ratio, goal; a row this run did not
    measure says so."""
    rows = ["| figure | clusterdiag | anchor (same run) | ratio | goal |", "|---|---|---|---|---|"]
    for words, name, anchor_name in GOAL_ROWS:
        figure = _find(figures, name)
        anchor = _find(figures, anchor_name) if anchor_name else None
        if figure is None:
            rows.append(f"| {words} | not measured in this run | | | |")
            continue
        ratio = figure.ratio
        if ratio is None and anchor is not None and anchor.value:
            ratio = figure.value / anchor.value
        where = f"{anchor.name}: {_value(anchor)}" if anchor else figure.baseline
        rows.append(f"| {words} | {_value(figure)} | {where} | "
                    f"{'' if ratio is None else f'{ratio:.2f}×'} | {figure.goal} |")
    return rows


def figures_table(figures: list[Figure]) -> list[str]:
    """Every figure of the run as Markdown: value, goal, ratio to its baseline."""
    rows = ["| figure | value | goal | ratio to baseline |", "|---|---|---|---|"]
    for f in figures:
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}× {f.baseline}".rstrip()
        rows.append(f"| {_cell(f.name)} | {_value(f)} | {_cell(f.goal)} | {_cell(ratio)} |")
    return rows


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def page(run: str, goals: list[str], every: list[str]) -> str:
    """docs/benchmarks.md: what the benchmarks are, then this run's two tables."""
    return "\n".join([
        "# Benchmarks",
        "",
        "What clusterdiag costs on one machine, beside anchors measured in the same run; "
        "written by `bench/run_all.py --write-docs`, do not edit by hand.",
        "",
        "`.venv/bin/python bench/run_all.py` runs every benchmark in `bench/` and prints one "
        "table: each figure, its goal where one is set, and its ratio to an anchor measured "
        "in the same run (`python3 -c pass`; node_exporter itself where "
        "`prometheus-node-exporter` is installed, Debian's package, and a "
        "node_exporter-equivalent sysfs reader everywhere; a minimal Xid/SXid parser). Every "
        "script checks that what it timed succeeded and produced what it claims (a prolog "
        "that printed its verdict from the source it names, a report with the expected "
        "GPUs, every node gathered) and exits non-zero otherwise; each says which code it "
        "measured (`measured: non-editable install ...` for the command-line figures, which "
        "run_all makes once). Figures, never pass/fail. `--write-docs` rewrites this page "
        "when every script succeeded.",
        "",
        "## Goals",
        "",
        run,
        "",
        *goals,
        "",
        "## Every figure",
        "",
        *every,
        "",
    ])


def write_docs(text: str) -> None:
    DOCS.write_text(text, encoding="utf-8")


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    started = time.time()
    load_before = os.getloadavg()[0]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.machine()}, Python {platform.python_version()}, " \
              f"{len(os.sched_getaffinity(0))} CPUs"
    print(f"# clusterdiag benchmarks, {stamp}, {machine}")
    baseline = python_start_s()
    figures = [Figure("python3 -c pass (baseline)", round(baseline * 1000, 1), "ms")]
    problems = []
    loads = [load_before]
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-install-"))
    try:
        install = make_install(work / "venv")
        env = {**os.environ, INSTALL_ENV: str(install.prefix)}
        results = []
        for script in BENCHES:
            results.append(run_one(script, quick, env))
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for got, problem in results:
        figures.extend(f for f in got if f.name != "python3 -c pass")  # one baseline row
        if problem:
            problems.append(problem)
    print(table(figures))
    for problem in problems:
        print(f"! {problem}")
    run = (f"From `bench/run_all.py{' --quick' if quick else ''}` on {stamp} ({machine}, "
           f"no GPU), a plain install of this checkout; the machine's 1-minute load average "
           f"during the run {min(loads):.1f}-{max(loads):.1f} (other work on it: absolute "
           f"times are slower than a quiet machine's, the ratios compare runs alternating "
           f"with their anchors, medians):")
    goals = goals_table(figures)
    print("\n".join(["", "# goals", run, "", *goals]))
    if "--write-docs" in sys.argv[1:] and not problems:
        write_docs(page(run, goals, figures_table(figures)))
        print(f"# wrote {DOCS}")
    print(f"# total {time.time() - started:.0f} s")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
