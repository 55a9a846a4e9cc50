"""Cluster commands: ``run --nodes`` (gathering), ``report merge`` and ``demo``.

All three end the same way: one ClusterReport, rendered in the chosen format, the bad node
set written alone with ``--exclude-file``, exit 1 when the cluster is not ready. Importing
this module costs only click; the report machinery loads when a command runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .errors import UsageError

if TYPE_CHECKING:
    from ..reports.cluster import ClusterReport
    from .config import Config

FORMATS = ("table", "json", "md", "html")
# Fewer nodes than this finish before a progress bar would be read.
PROGRESS_FROM = 8


def report_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--format``, ``--output``, ``--exclude-file`` and ``--need`` (DESIGN §3)."""
    for option in reversed([
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                     help="table (terminal), json, md (tickets, wikis) or html (one file)."),
        click.option("--output", type=click.Path(path_type=Path), default=None,
                     help="Write the report to FILE instead of stdout."),
        click.option("--exclude-file", type=click.Path(path_type=Path), default=None,
                     help="Write the bad nodes alone, as one folded node set, to FILE."),
        click.option("--need", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Ready means: a job of N nodes can start on the ready nodes."),
    ]):
        func = option(func)
    return func


def _write(path: Path, text: str, what: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None


def emit(report: ClusterReport, fmt: str, output: Path | None, exclude_file: Path | None
         ) -> int:
    """Render, write, and return the exit code (0 ready, 1 not)."""
    import json

    from ..reports.cluster import fold

    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=1) + "\n"
    elif fmt == "md":
        from ..reports.render_md import render_md

        text = render_md(report)
    elif fmt == "html":
        from ..reports.render_html import render_html

        text = render_html(report)
    else:
        from ..reports.render_terminal import render_terminal

        tty = output is None and sys.stdout.isatty()
        width = os.get_terminal_size().columns if tty else 160
        text = render_terminal(report, colour=tty, width=max(80, width))
    if output is None:
        sys.stdout.write(text)
    else:
        _write(output, text, "--output")
    if exclude_file is not None:
        bad = fold(report.bad_nodes)
        _write(exclude_file, bad + "\n" if bad else "", "--exclude-file")
    return 0 if report.ready else 1


def _read_nodes(text: str, where: str) -> list[str]:
    from ClusterShell.NodeSet import NodeSetParseError

    from ..reports.nodeset import expand

    names: list[str] = []
    for word in text.split() if where != "--nodes" else [text]:
        try:
            names.extend(expand(word))
        except NodeSetParseError as exc:
            raise UsageError(f"{where}: bad node set {word!r}: {exc}") from None
    return sorted(set(names))


def resolve_nodes(arg: str | None) -> list[str] | None:
    """``--nodes``: a node set, ``-`` (stdin) or a file of node sets; without it, the
    allocation's nodes (SLURM_JOB_NODELIST) when run inside one."""
    if arg is None:
        inside = os.environ.get("SLURM_JOB_NODELIST")
        return _read_nodes(inside, "SLURM_JOB_NODELIST") if inside else None
    if arg == "-":
        names = _read_nodes(sys.stdin.read(), "--nodes -")
    elif os.path.isfile(arg):
        try:
            names = _read_nodes(Path(arg).read_text(encoding="utf-8"), f"--nodes {arg}")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--nodes {arg}: cannot read: {exc}") from None
    else:
        names = _read_nodes(arg, "--nodes")
    if not names:
        raise UsageError("--nodes: no nodes given")
    return names


class _Progress:
    """A rich progress bar on stderr when it is a terminal and there are enough nodes."""

    def __init__(self, total: int, label: str) -> None:
        self.bar: Any = None
        if total >= PROGRESS_FROM and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task(label, total=total)

    def __enter__(self) -> Callable[[], None] | None:
        if self.bar is None:
            return None
        self.bar.start()
        return lambda: self.bar.advance(self.task)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _cluster_settings(config: Config) -> Any:
    from ..reports.cluster_checks import settings_from

    return settings_from(config.section("cluster"), f"config {config.path or '(defaults)'}")


def gather_and_judge(config: Config, nodes: Sequence[str], via: str, need: int | None,
                     urls: dict[str, str] | None = None, token: str | None = None
                     ) -> ClusterReport:
    from dataclasses import replace

    from ..reports import gather
    from ..reports.cluster_checks import judge

    checks = _cluster_settings(config)
    settings = gather.settings_from(config.section("cluster"),
                                    config.section("agent").get("token_file"))
    if token is not None:
        settings = replace(settings, token=token)
    with _Progress(len(nodes), f"gathering {len(nodes)} nodes via {via}") as advance:
        if via == "agent":
            result = gather.gather_agent(urls or gather.agent_urls(nodes, settings.agent_url),
                                         settings, advance)
        elif via == "ssh":
            result = gather.gather_ssh(nodes, settings, advance)
        else:
            result = gather.gather_srun(nodes, settings)
    return judge(*result, checks, via=via, need=need)


def one_node_report(config: Config, node_report: Any, need: int | None) -> ClusterReport:
    """This node alone as a cluster report: md/html and ``--exclude-file`` without
    ``--nodes`` render the same way as for a cluster."""
    from ..reports.cluster_checks import judge
    from ..reports.summary import summarize

    return judge([summarize(node_report.to_dict())], [], _cluster_settings(config),
                 via="local", need=need)


def _merge(config_path: Path | None, files: tuple[str, ...], fmt: str, output: Path | None,
           exclude_file: Path | None, need: int | None) -> None:
    from .. import checks
    from ..reports.cluster_checks import judge
    from ..reports.merge import expand, merge_files
    from .config import load_config

    config = load_config(config_path, {s.id: s.params for s in checks.REGISTRY.values()})
    settings = _cluster_settings(config)
    paths = expand(files)
    if not paths:
        raise UsageError("report merge: no node report files (the directories hold no *.json)")
    summaries, failures = merge_files(paths)
    sys.exit(emit(judge(summaries, failures, settings, via="files", need=need), fmt, output,
                  exclude_file))


def register(cli: click.Group) -> None:
    @cli.group("report")
    def report_group() -> None:
        """Cluster reports from saved node reports."""

    @report_group.command("merge")
    @click.argument("files", nargs=-1, required=True)
    @click.option("--config", "config_path", type=click.Path(path_type=Path), default=None)
    @report_options
    def merge(files: tuple[str, ...], config_path: Path | None, fmt: str,
              output: Path | None, exclude_file: Path | None, need: int | None) -> None:
        """Merge node reports (files, or directories of *.json) into a cluster report. A
        file that is not a node report is a cluster.reachability finding, not an error."""
        _merge(config_path, files, fmt, output, exclude_file, need)

    @cli.command("demo")
    @click.option("--spec", type=click.Path(path_type=Path), default=None,
                  help="A cluster spec (default: 16 DGX H100 + one GB200 NVL72 rack).")
    @click.option("--config", "config_path", type=click.Path(path_type=Path), default=None)
    @report_options
    def demo(spec: Path | None, config_path: Path | None, fmt: str, output: Path | None,
             exclude_file: Path | None, need: int | None) -> None:
        """A simulated cluster end to end: agents on loopback, gather over HTTP, report."""
        from .demo import run_demo

        sys.exit(run_demo(spec, config_path, fmt, output, exclude_file, need))


def run_cluster(config_path: Path | None, nodes_arg: str | None, via: str | None,
                forward: dict[str, Any], local_only: dict[str, Any], fmt: str,
                output: Path | None, exclude_file: Path | None, need: int | None) -> int:
    """``run --nodes``: gather, judge, render; returns the exit code."""
    import shlex
    from dataclasses import replace

    from .. import checks
    from .config import load_config

    via = via or "agent"
    if via == "local":
        raise UsageError("--via local checks this node only: drop --nodes, or gather with "
                         "--via agent, ssh or srun")
    given = [flag for flag, value in local_only.items() if value is not None]
    if given:
        raise UsageError(f"{given[0]} reads one node; it does not combine with --nodes")
    names = resolve_nodes(nodes_arg)
    if names is None:
        raise UsageError(f"--via {via}: needs --nodes (or SLURM_JOB_NODELIST inside an "
                         "allocation)")
    config = load_config(config_path, {s.id: s.params for s in checks.REGISTRY.values()})
    extra = [f"{flag} {shlex.quote(str(value))}" for flag, value in forward.items()
             if value is not None]
    if extra and via == "agent":
        raise UsageError(f"{extra[0].split()[0]}: agents report at their own settings; it "
                         "applies with --via ssh or srun, where each node runs the checks")
    if extra:
        section = dict(config.section("cluster"))
        section["remote_command"] = " ".join([section["remote_command"], *extra])
        config = replace(config, data={**config.data, "cluster": section})
    return emit(gather_and_judge(config, names, via, need), fmt, output, exclude_file)
