"""``clusterdiag report merge FILE...``: a cluster report from saved node reports."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..cluster.judge import merge_reports
from .emit import emit
from .options import line_bytes, report_options


@click.group("report")
def report_group() -> None:
    """Cluster reports from saved node reports."""


@report_group.command("merge")
@click.argument("files", nargs=-1, required=True)
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None)
@report_options
def merge(files: tuple[str, ...], config_path: Path | None, fmt: str,
          output: Path | None, exclude_file: Path | None, need: int | None,
          max_bytes: int | None) -> None:
    """Merge node reports (files, or directories of *.json) into a cluster report. A
    file that is not a node report is a cluster.reachability finding, not an error."""
    budget = line_bytes(fmt, max_bytes)
    sys.exit(emit(merge_reports(config_path, files, need), fmt, output, exclude_file,
                  max_bytes=budget))


COMMANDS = (report_group,)
