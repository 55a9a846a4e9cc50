"""``clusterdiag demo``: a simulated cluster end to end (agent/cluster/demo.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..cluster.demo import banner, run_demo
from .emit import emit
from .options import line_bytes, report_options


@click.command("demo")
@click.option("--spec", type=click.Path(path_type=Path), default=None,
              help="A cluster spec (default: 16 DGX H100 + one GB200 NVL72 rack).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None)
@report_options
def demo(spec: Path | None, config_path: Path | None, fmt: str, output: Path | None,
         exclude_file: Path | None, need: int | None, max_bytes: int | None) -> None:
    """A simulated cluster end to end: agents on loopback, gather over HTTP, report."""
    budget = line_bytes(fmt, max_bytes)
    report = run_demo(spec, config_path, need)
    title = banner(spec) if fmt == "table" else None
    sys.exit(emit(report, fmt, output, exclude_file, title, budget))


COMMANDS = (demo,)
