"""``clusterdiag run``: check this node, or gather every node of ``--nodes``."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ...checks.core.finding import Status
from ...reports.render.line import node_line
from ...reports.render.table import render_table
from ..base.errors import ExitCode, UsageError
from ..run import session
from ..run.runner import evaluate, run_node
from ..run.snapshot_file import load_pair
from .options import line_bytes, report_options, source_options
from .output import is_terminal, terminal_width, write

if TYPE_CHECKING:
    from ...reports.model.node import NodeReport
    from ..settings.config import Config


@click.command("run")
@source_options
@click.option("--checks", "patterns", default=None, help="Glob(s) of check ids, comma-separated.")
@click.option("--budget", type=float, default=None, help="Seconds the whole run may take.")
@report_options
@click.option("--all", "all_findings", is_flag=True,
              help="Table: list every finding (passes and skips too), not folded.")
@click.option("--nodes", default=None, metavar="NODESET",
              help="Nodes to gather (gpu[001-128]), '-' for stdin, or a file of node sets; "
                   "inside an allocation, SLURM_JOB_NODELIST.")
@click.option("--via", type=click.Choice(["local", "agent", "ssh", "srun"]), default=None,
              help="local (this node; the default without --nodes), agent (default with "
                   "--nodes), ssh (ClusterShell) or srun.")
@click.option("--from-snapshot", "from_snapshot", type=click.Path(path_type=Path), default=None,
              metavar="FILE", help="Judge a saved `clusterdiag snapshot` instead of a node.")
@click.option("--previous", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="With --from-snapshot: an earlier snapshot of the same node, for the rate "
                   "checks (implies --level full).")
def run(config_path: Path | None, root: Path | None, kernel_log: Path | None,
        simulate: str | None, node: str | None, profile: str | None, level: str | None,
        patterns: str | None, budget: float | None, fmt: str, output: Path | None,
        exclude_file: Path | None, need: int | None, max_bytes: int | None,
        all_findings: bool, nodes: str | None, via: str | None, from_snapshot: Path | None,
        previous: Path | None) -> None:
    """Check this node, or gather every node of --nodes, and print the report."""
    budget_bytes = line_bytes(fmt, max_bytes)
    session.budget_flag(budget)
    session.check_patterns(patterns)
    if from_snapshot is not None or previous is not None:
        given = {"--root": root, "--kernel-log": kernel_log, "--simulate": simulate,
                 "--node": node, "--nodes": nodes, "--via": via}
        config, report = _rejudge(from_snapshot, previous, given, config_path, profile, level,
                                  budget, patterns)
        _emit_node(config, report, fmt, output, exclude_file, need, all_findings,
                   budget_bytes)
    if via not in (None, "local") or nodes:
        # The cluster stack (the gather's aiohttp, ClusterShell, rich) loads only for a
        # cluster report: one node's run, the common case (NHC, cron), never pays for it.
        from ..cluster.judge import run_cluster
        from ..slurm.topology import read_blocks
        from .emit import emit

        forward = {"--level": level, "--checks": patterns, "--profile": profile,
                   "--budget": budget}
        local_only = {"--root": root, "--kernel-log": kernel_log, "--simulate": simulate,
                      "--node": node}
        cluster = run_cluster(config_path, nodes, via, forward, local_only, need,
                              topology=read_blocks)
        sys.exit(emit(cluster, fmt, output, exclude_file, max_bytes=budget_bytes))
    if simulate is not None and node is None:
        _say_which_node(simulate)
    config, env = session.setup(config_path, root, kernel_log, simulate, node)
    report = run_node(env, config, session.run_options(config, level, profile, budget,
                                                       patterns))
    _emit_node(config, report, fmt, output, exclude_file, need, all_findings, budget_bytes)


def _say_which_node(simulate: str) -> None:
    """One line on stderr when a spec of several nodes is run without ``--node``: only its
    first node is checked (docs/design.md §3), which an operator who wrote a cluster into
    the spec would not otherwise learn. Running them all is ``demo`` or ``qualify``'s job:
    a cluster report needs the gather, and ``--simulate`` reads one node."""
    names = session.simulated_nodes(simulate)
    if len(names) > 1:
        print(f"clusterdiag: --simulate {simulate}: checking {names[0]}, the first of its "
              f"{len(names)} nodes; --node NAME checks another", file=sys.stderr)


def _rejudge(from_snapshot: Path | None, previous: Path | None, given: Mapping[str, object],
             config_path: Path | None, profile: str | None, level: str | None,
             budget: float | None, patterns: str | None) -> tuple[Config, NodeReport]:
    """A saved snapshot judged again, as of when it was taken (docs/design.md §3 --from-snapshot):
    the source flags say where a node is read from, so none of them applies."""
    if from_snapshot is None:
        raise UsageError("--previous needs --from-snapshot")
    if clash := [flag for flag, value in given.items() if value is not None]:
        raise UsageError(f"--from-snapshot judges a saved snapshot: {', '.join(clash)} "
                         "cannot be used with it")
    config = session.load(config_path)
    snap, before = load_pair(from_snapshot, previous)
    options = session.run_options(config, level or ("full" if before else None), profile,
                                  budget, patterns)
    return config, evaluate(snap, config, options, previous=before, now=snap.taken_at)


def _emit_node(config: Config, report: NodeReport, fmt: str, output: Path | None,
               exclude_file: Path | None, need: int | None, all_findings: bool,
               max_bytes: int) -> NoReturn:
    """Write one node's report as the report options say, and exit with its verdict;
    ``max_bytes`` is the budget of ``--format line``."""
    if fmt in ("md", "html") or exclude_file is not None or need is not None:
        from ..cluster.judge import one_node_report  # the cluster stack, as in run()
        from .emit import emit

        sys.exit(emit(one_node_report(config, report, need), fmt, output, exclude_file,
                      max_bytes=max_bytes))
    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=2) + "\n"
    elif fmt == "line":
        text = node_line(report, max_bytes)
    else:
        text = render_table(report, colour=is_terminal(output),
                            width=max(60, terminal_width(output, 80)), all_findings=all_findings)
    write(text, output)
    exit_if_nothing_read(report.sources)
    failed = report.verdict in (Status.FAIL, Status.ERROR)
    sys.exit(ExitCode.FAIL if failed else ExitCode.READY)


def nothing_read(sources: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The first source's error when every source the run needed failed (not a timeout:
    a source that does not answer is the node's trouble): the node was not judged at all,
    which is clusterdiag's trouble, exit 3, never a fail. ``sources`` are a report's or a
    snapshot's (name -> status, error); one not collected (allreduce unless planned)
    neither read nor failed, so it does not count."""
    tried = {name: s for name, s in sources.items() if s.get("status") != "not_collected"}
    if tried and all(s.get("status") == "error" for s in tried.values()):
        name, first = next(iter(tried.items()))
        return f"{name}: {first.get('error')}"
    return None


def exit_if_nothing_read(sources: Mapping[str, Mapping[str, Any]]) -> None:
    """Exit 3 with one line when ``nothing_read``; what was written stays written."""
    unread = nothing_read(sources)
    if unread is not None:
        print(f"clusterdiag: could not read the node: {unread}", file=sys.stderr)
        sys.exit(ExitCode.COLLECT)


COMMANDS = (run,)
