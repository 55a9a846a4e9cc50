"""``SourceEnv.counters``: the Slurm programs judging the quick checks read no hardware
counters (IB port counters, PCIe AER), which are most of a node's files; every other
reader, and a Slurm program at ``--level full`` (rate checks), reads them."""

from __future__ import annotations

import time
from pathlib import Path

from clusterdiag.agent.collectors import ib, pci
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.agent.run import session
from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.slurm.entry import Inputs, Run
from clusterdiag.agent.slurm.job import JobEnv
from clusterdiag.agent.slurm.log import Log

REAL_H100 = Path(__file__).resolve().parents[1] / "fixtures/ib/gpud-h100"


def _ib(env: SourceEnv) -> tuple[list[ib.IbDevice], SourceStats]:
    stats = SourceStats()
    return ib.collect(env, stats, time.monotonic() + 30), stats


def test_ib_ports_without_counters_keep_everything_else() -> None:
    full, full_stats = _ib(SourceEnv(root=REAL_H100))
    bare, bare_stats = _ib(SourceEnv(root=REAL_H100, counters=False))
    assert any(p.counters for d in full for p in d.ports)
    assert all(not p.counters and not p.hw_counters for d in bare for p in d.ports)
    assert bare_stats.files_read < full_stats.files_read / 2
    for with_counters, without in zip(full, bare, strict=True):
        assert [(p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer, p.netdev)
                for p in with_counters.ports] == [
            (p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer, p.netdev)
            for p in without.ports]


def test_pci_devices_without_aer_keep_their_links() -> None:
    root = make_root(build(NodeSpec("n1", "dgx-h100")))
    full = pci.collect(SourceEnv(root=root), SourceStats(), time.monotonic() + 30)
    bare = pci.collect(SourceEnv(root=root, counters=False), SourceStats(),
                       time.monotonic() + 30)
    assert any(d.aer for d in full)
    assert not any(d.aer for d in bare)
    assert [(d.bdf, d.path, d.driver, d.current_link_width) for d in full] == [
        (d.bdf, d.path, d.driver, d.current_link_width) for d in bare]


def _run(tmp_path: Path, level: str | None) -> Run:
    config = session.load(None)
    inputs = Inputs(root=tmp_path, level=level, node="n1")
    job = JobEnv.from_environ()
    return Run("prolog", config, None, job, Log("prolog"), time.monotonic() + 30, inputs, "n1")


def test_a_slurm_program_reads_counters_only_for_rate_checks(tmp_path: Path) -> None:
    assert _run(tmp_path, None).env.counters is False
    assert _run(tmp_path, "quick").env.counters is False
    assert _run(tmp_path, "full").env.counters is True
    assert SourceEnv().counters is True  # run, snapshot, the agent
