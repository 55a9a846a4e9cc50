"""``clusterdiag qualify``: the active tests (agent/qualify/), or saved tool logs judged."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ...checks.core.levels import LEVEL_NAMES
from ...reports.model.cluster import fold
from ...reports.render.qualify import render_html, render_md, render_terminal
from ..base.errors import ExitCode, UsageError
from ..qualify.command import Request, run
from ..run import session
from .options import report_options
from .output import write


@click.command("qualify")
@click.option("--nodes", default=None, metavar="NODESET",
              help="Nodes to qualify; inside an allocation, SLURM_JOB_NODELIST.")
@click.option("--via", type=click.Choice(["srun", "ssh", "local"]), default=None,
              help="srun (default inside an allocation), ssh (with --nodes) or local.")
@click.option("--tests", default=None, metavar="LIST",
              help="Comma-separated: node,pairs,rails,scaling,rack (default: what applies).")
@click.option("--level", type=click.Choice(LEVEL_NAMES), default=None,
              help="quick (default) or full: longer runs and dcgmi diag -r 3.")
@click.option("--budget", type=float, default=None,
              help="Seconds the whole run may take (default: qualify.budget_s).")
@click.option("--fit-budget", "fit_budget", is_flag=True,
              help="Run what fits --budget, leaving out the tests that do not (rack first, "
                   "then scaling, rails, pairs), instead of refusing to start.")
@click.option("--profile", default=None, help="Platform profile name or a site profile file.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Config file (default /etc/clusterdiag/config.yaml when present).")
@click.option("--simulate", default=None, metavar="SPEC",
              help="Qualify a simulated cluster: its tools are stand-ins.")
@click.option("--seed", type=int, default=0, help="Noise seed of the simulated tools.")
@click.option("--drain", is_flag=True, help="Drain the bad nodes through scontrol.")
@click.option("--baseline", type=click.Path(path_type=Path), default=None,
              help="Save the figures here (first run) or report drift against them.")
@click.option("--medians", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Record the fleet's per-profile medians here, merged with what it holds "
                   "(default: qualify.medians_file); validate judges a node against them.")
@click.option("--from-logs", "from_logs", multiple=True, metavar="FILE",
              help="Judge saved tool outputs instead of running the tools (repeatable).")
@click.argument("logs", nargs=-1, type=click.Path(path_type=Path))
@report_options
def qualify(nodes: str | None, via: str | None, tests: str | None, level: str | None,
            budget: float | None, fit_budget: bool, profile: str | None, config_path: Path | None,
            simulate: str | None, seed: int, drain: bool, baseline: Path | None,
            medians: Path | None, from_logs: tuple[str, ...], logs: tuple[Path, ...], fmt: str,
            output: Path | None, exclude_file: Path | None, need: int | None,
            max_bytes: int | None) -> None:
    """Run the active tests on every node and between nodes (or judge saved logs:
    --from-logs FILE [FILE...]) and report stragglers against the profile and the node's
    peers. The schedule and its estimated duration are printed on stderr before it starts."""
    if max_bytes is not None:
        raise UsageError("--max-bytes: qualify writes no one-line report")
    if logs and not from_logs:
        raise UsageError(f"unexpected argument {logs[0]} (saved logs go after --from-logs)")
    request = Request(nodes, via, tests, level, budget, profile, simulate,
                      (*from_logs, *map(str, logs)), baseline, drain, seed, adopt_orphans=True,
                      fit_budget=fit_budget, say=lambda line: click.echo(line, err=True),
                      medians=medians)
    report = run(request, session.load(config_path))
    report.cluster.need = need
    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=1) + "\n"
    elif fmt == "md":
        text = render_md(report)
    elif fmt == "html":
        text = render_html(report)
    else:
        tty = output is None and sys.stdout.isatty()
        text = render_terminal(report, os.get_terminal_size().columns if tty else 160)
    write(text, output)
    if exclude_file is not None:
        bad = fold(report.bad_nodes)
        write(bad + "\n" if bad else "", exclude_file, "--exclude-file")
    sys.exit(ExitCode.READY if report.ready else ExitCode.FAIL)


COMMANDS = (qualify,)
