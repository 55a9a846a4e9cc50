"""The demo: a simulated cluster end to end, on a machine without GPUs.

Simulated agents start on loopback (each node on its own 127.0.x.y, never a routable
address), the report is gathered from them over real HTTP with a bearer token, judged and
rendered like any cluster run; everything started is stopped again, also on Ctrl-C or
SIGTERM, so no agent is left listening.
"""

from __future__ import annotations

import copy
import secrets
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from ..base.errors import ExitCode, UsageError
from ..run import session
from ..settings.config import Config
from ..sim.cluster import blocks, present, racks
from ..sim.spec import load_spec
from .fleet import Fleet
from .judge import gather_and_judge

if TYPE_CHECKING:
    from ...reports.model.cluster import ClusterReport

DEMO_SPEC = Path(__file__).parents[1] / "sim" / "demo-cluster.yaml"


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the ``finally`` that stops the agents runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(ExitCode.TERMINATED)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def with_racks(config: Config, racks: dict[str, str]) -> Config:
    """The spec's racks as ``cluster.racks`` unless the config names racks itself."""
    data = copy.deepcopy(config.data)
    if not data["cluster"].get("racks"):
        data["cluster"]["racks"] = racks
    return Config(data, config.path)


def banner(spec_path: Path | None) -> str:
    """The demo's first line: what follows is a simulation, not this machine or a real
    cluster, and its problems were planted on purpose."""
    spec = load_spec(str(spec_path or DEMO_SPEC))
    faults = sum(len(node.faults) for node in spec.nodes.values())
    planted = f"{faults} planted fault{'s' if faults != 1 else ''}" if faults else "no faults"
    return (f"DEMO: a simulated cluster, {len(spec.nodes)} nodes, {planted} (no real "
            "hardware read)\n")


def run_demo(spec_path: Path | None, config_path: Path | None, need: int | None
             ) -> ClusterReport:
    """Start the spec's simulated agents, gather their reports over HTTP, judge them, and
    stop every agent again."""
    if spec_path is not None and not spec_path.is_file():
        raise UsageError(f"--spec {spec_path}: no such file")
    config = session.load(config_path)
    spec = load_spec(str(spec_path or DEMO_SPEC))
    config = with_racks(config, racks(spec))
    cluster = present(spec)
    token = secrets.token_urlsafe(24)
    with _sigterm_exits():
        fleet = Fleet(cluster, token=token, config=config)
        try:
            urls = fleet.start()
            report = gather_and_judge(config, sorted(urls), "agent", need, urls=urls,
                                      token=token, blocks=blocks(spec))
        finally:
            fleet.close()
    return report
