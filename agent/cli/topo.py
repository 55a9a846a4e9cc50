"""``clusterdiag topo``: the node's GPU/NIC matrix, as ``nvidia-smi topo -m`` shows it.

Built from the PCI tree in sysfs and NVML's NVLink view, so it works where nvidia-smi is
absent (captured trees, the simulator) and names the same classes where it is present.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from ...reports.render.topo import build, render_text, render_wrapped
from ..base.errors import CollectError
from ..run import session
from ..run.collect import SOURCES, collect_snapshot
from ..run.runner import assign_roles, resolve_profile
from .options import source_options

TOPO_SOURCES = ("pci", "nvml", "infiniband")


@click.command("topo")
@source_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--budget", type=float, default=None, help="Seconds collecting may take.")
def topo(config_path: Path | None, root: Path | None, kernel_log: Path | None,
         simulate: str | None, node: str | None, profile: str | None, level: str | None,
         fmt: str, budget: float | None) -> None:
    """The node's GPU/NIC topology matrix (X, NV#, PIX, PXB, PHB, NODE, SYS)."""
    config, env = session.setup(config_path, root, kernel_log, simulate, node)
    options = session.run_options(config, level, profile, budget, None)
    names = [n for n in TOPO_SOURCES if n in SOURCES]
    snap = collect_snapshot(env, names, time.monotonic() + options.budget_s, options.level)
    if snap.pci is None:
        stats = snap.sources.get("pci")
        raise CollectError(f"topo: PCI tree not read ({stats.error if stats else 'skipped'})")
    assign_roles(snap, config, resolve_profile(options.profile, snap)[0])
    matrix = build(snap)
    if fmt == "json":
        data = {"node": snap.node, "simulated": snap.simulated, **matrix.to_dict()}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif not matrix.labels:
        sys.stdout.write(f"{snap.node}: no NVIDIA GPU and no RDMA NIC found on the PCI bus "
                         f"({len(snap.pci)} devices read): no topology to show\n")
    elif sys.stdout.isatty():
        sys.stdout.write(render_wrapped(matrix, os.get_terminal_size().columns, colour=True))
    else:
        sys.stdout.write(render_text(matrix))


COMMANDS = (topo,)
