"""The prolog's record of nccl.acs as root judged it: it stands only while the bus and
every bridge's ACS control read now are as they were, and only root's store holds it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from clusterdiag.agent.settings import config_cache
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.pci_tree import ACS_CTRL_OFFSET
from clusterdiag.agent.slurm import rerun_record
from clusterdiag.agent.slurm.agent_report import AgentReport
from clusterdiag.agent.slurm.entry import Inputs, Run
from clusterdiag.agent.slurm.job import JobEnv
from clusterdiag.agent.slurm.log import Log
from clusterdiag.agent.slurm.prolog import rerun_findings
from clusterdiag.agent.slurm.rerun_record import RerunRecord
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.index import ENTRIES

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the record is root's alone")

ACS = [ENTRIES["nccl.acs"]]
DEVICES = "sys/bus/pci/devices"


@pytest.fixture
def tree() -> Path:
    """A dgx-h100's tree as a captured one would be read (``--root``)."""
    return make_root(build(NodeSpec("n1", "dgx-h100")))


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Root's store, here: a directory only root may write."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    monkeypatch.setattr(config_cache, "DIRECTORY", str(directory))
    return directory


REPORT = AgentReport("n1", {"name": "dgx-h100"}, "2026-01-01T00:00:00+00:00", 1.0, "quick",
                     [])


def _run(tree: Path) -> Run:
    return Run("prolog", Config(), None, JobEnv(None, None, None, None, None), Log("prolog"),
               time.monotonic() + 8, Inputs(root=str(tree)), node="n1")


def _rerun(tree: Path) -> tuple[list[Finding], Run]:
    """nccl.acs re-run as the prolog re-runs the unprivileged agent's skip."""
    run = _run(tree)
    return rerun_findings(run, REPORT, {"nccl.acs"}), run


def _bridges_above(tree: Path) -> set[str]:
    """The config space of every bridge above an NVIDIA or Mellanox function, those
    vendors' own excepted (the PCI source reads them as functions: collectors/pci.py)."""
    kept = {entry.name for entry in (tree / DEVICES).iterdir()
            if (entry / "vendor").read_text().strip() in ("0x10de", "0x15b3")}
    above = {part for bdf in kept
             for part in os.path.realpath(tree / DEVICES / bdf).split("/")[:-1]
             if part.count(":") == 2}
    return {str(tree / DEVICES / bdf / "config") for bdf in above - kept
            if (tree / DEVICES / bdf).exists()}


def _bridge_above_a_gpu(tree: Path) -> Path:
    gpu = next(entry for entry in sorted((tree / DEVICES).iterdir())
               if (entry / "class").read_text().startswith("0x0302"))
    return tree / DEVICES / os.path.realpath(gpu).split("/")[-2] / "config"


def _recorded_files(store: Path) -> list[str]:
    (kept,) = json.loads((store / rerun_record.NAME).read_text())["document"].values()
    return [read[0] for read in kept["acs"]]


def _set_acs(config: Path, value: int) -> None:
    data = bytearray(config.read_bytes())
    data[ACS_CTRL_OFFSET:ACS_CTRL_OFFSET + 2] = value.to_bytes(2, "little")
    config.write_bytes(bytes(data))


def test_the_verdict_stands_while_the_bus_and_the_bridges_are_as_they_were(
        tree: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    judged, first = _rerun(tree)
    assert first.unchanged == set()
    assert "judging again" in capsys.readouterr().err
    assert [f.status for f in judged] == [Status.PASS]
    again, second = _rerun(tree)
    assert second.unchanged == {"nccl.acs"}
    assert again == judged
    assert set(_recorded_files(store)) == _bridges_above(tree)


def test_a_bridge_whose_acs_control_changed_is_judged_again(
        tree: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rerun(tree)
    bridge = _bridge_above_a_gpu(tree)
    assert str(bridge) in _recorded_files(store)
    _set_acs(bridge, 0x1D)  # ReqRedir, CmpltRedir, EgressCtrl: what setpci may turn on
    capsys.readouterr()
    failed, run = _rerun(tree)
    assert run.unchanged == set()
    assert "ACS control changed" in capsys.readouterr().err
    assert {f.status for f in failed} == {Status.FAIL}
    _set_acs(bridge, 0)
    passed, run = _rerun(tree)
    assert run.unchanged == set()
    assert [f.status for f in passed] == [Status.PASS]


def test_a_function_found_again_or_a_new_one_is_a_new_bus(tree: Path, store: Path) -> None:
    _rerun(tree)
    entry = sorted((tree / DEVICES).iterdir())[0]
    target = os.readlink(entry)
    os.symlink(target, tree / DEVICES / ".anew")
    os.replace(tree / DEVICES / ".anew", entry)  # removed and found again: a new inode
    assert _rerun(tree)[1].unchanged == set()
    assert _rerun(tree)[1].unchanged == {"nccl.acs"}
    os.symlink(target, tree / DEVICES / "0000:ff:1f.7")
    assert _rerun(tree)[1].unchanged == set()


def test_the_record_holds_the_acs_control_judged_not_one_read_after(
        tree: Path, store: Path) -> None:
    """A register that changed between the judging and the keeping: the record holds the
    value judged, so the next prolog sees the change instead of the old verdict."""
    bridge = _bridge_above_a_gpu(tree)
    verdict = [Finding.passed("node", "no ACS redirect").replace(check="nccl.acs")]
    _set_acs(bridge, 0x1D)  # turned on after the PCI source read 0
    RerunRecord(str(tree), ACS, "dgx-h100", "prolog").keep(verdict, [[str(bridge), 0, None]])
    assert RerunRecord(str(tree), ACS, "dgx-h100", "prolog").findings() is None
    _set_acs(bridge, 0)
    assert RerunRecord(str(tree), ACS, "dgx-h100", "prolog").findings() == verdict


def test_an_error_is_never_recorded(tree: Path, store: Path) -> None:
    record = RerunRecord(str(tree), ACS, "dgx-h100", "prolog")
    record.keep([Finding.error("node", "source not collected (pci: timeout)").replace(
        check="nccl.acs")], [])
    assert record.why is not None
    assert "error" in record.why
    assert not (store / rerun_record.NAME).exists()


def test_another_profile_or_tree_has_its_own_record(tree: Path, store: Path) -> None:
    verdict = [Finding.passed("node", "no ACS redirect").replace(check="nccl.acs")]
    RerunRecord(str(tree), ACS, "dgx-h100", "prolog").keep(verdict, [])
    assert RerunRecord(str(tree), ACS, "dgx-h100", "prolog").findings() == verdict
    assert RerunRecord(str(tree), ACS, "hgx-h100-8gpu", "prolog").findings() is None
    other = make_root(build(NodeSpec("n1", "dgx-h100")))
    assert RerunRecord(str(other), ACS, "dgx-h100", "prolog").findings() is None


def test_changed_code_is_judged_again(tree: Path, store: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    reader = tmp_path / "pci_config.py"
    reader.write_text("v1")
    monkeypatch.setattr(rerun_record, "_READERS", (str(reader),))
    verdict = [Finding.passed("node", "no ACS redirect").replace(check="nccl.acs")]
    RerunRecord(str(tree), ACS, "dgx-h100", "prolog").keep(verdict, [])
    assert RerunRecord(str(tree), ACS, "dgx-h100", "prolog").findings() == verdict
    reader.write_text("v2, upgraded")
    assert RerunRecord(str(tree), ACS, "dgx-h100", "prolog").findings() is None


@pytest.mark.parametrize("mode", [0o770, 0o707])
def test_a_store_others_may_write_is_never_read(tree: Path, store: Path, mode: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _rerun(tree)
    store.chmod(mode)
    capsys.readouterr()
    judged, run = _rerun(tree)
    assert run.unchanged == set()
    assert [f.status for f in judged] == [Status.PASS]
    assert "refused" in capsys.readouterr().err


@pytest.mark.parametrize("hostile", [
    {"acs": "x", "findings": [{"status": "pass"}]},
    {"acs": [], "findings": [{"status": "no such", "component": "node", "message": "m"}]},
    {"acs": [], "findings": []},
    {"acs": [[1, 0, None]], "findings": [{}]},
    {"acs": [[]], "findings": [{"status": "pass", "component": "node", "message": "m"}]},
    "not a record",
])
def test_a_record_that_is_not_one_is_judged_again(tree: Path, store: Path,
                                                  hostile: object) -> None:
    _rerun(tree)
    path = store / rerun_record.NAME
    stored = json.loads(path.read_text())
    stored["document"] = {key: hostile for key in stored["document"]}
    path.write_text(json.dumps(stored))
    judged, run = _rerun(tree)
    assert run.unchanged == set()
    assert [f.status for f in judged] == [Status.PASS]


def test_the_gpu_processes_skip_needs_no_nvml_collector_beside_a_recorded_acs(
        tree: Path, store: Path) -> None:
    """Where NVML's library cannot load, gpu.processes skips pointing at gpu.responsive
    whatever else is re-run, as the runner says it."""
    from clusterdiag.agent.read import nvml_library

    if not nvml_library.missing():
        pytest.skip("NVML's library loads here: gpu.processes is collected")
    said = rerun_findings(_run(tree), REPORT, {"nccl.acs", "gpu.processes"})
    assert {f.check: f.status for f in said} == {"gpu.processes": Status.SKIP,
                                                 "nccl.acs": Status.PASS}
    assert "gpu.responsive" in next(f.message for f in said if f.check == "gpu.processes")


def test_the_record_stands_beside_a_check_collected_for_the_job(
        tree: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU node NVML's library loads and gpu.processes is collected for every job:
    nccl.acs's record stands beside it all the same."""
    from clusterdiag.agent.read import nvml_library

    monkeypatch.setattr(nvml_library, "missing", lambda: False)
    both = {"nccl.acs", "gpu.processes"}
    first = _run(tree)
    judged = rerun_findings(first, REPORT, both)
    second = _run(tree)
    again = rerun_findings(second, REPORT, both)
    assert (first.unchanged, second.unchanged) == (set(), {"nccl.acs"})
    assert {f.check for f in again} == both
    assert [f for f in again if f.check == "nccl.acs"] == [
        f for f in judged if f.check == "nccl.acs"]
