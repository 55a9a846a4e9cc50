"""Faults that strike while a node is being read, through the real command.

A simulated DGX H100 tree is written once and copied per test; each test breaks one thing
in its copy the way a live node breaks (a device unplugged between listing and reading, a
file that cannot be read, an NVML call failing on one GPU, a slow or hung source) and runs
``clusterdiag run --simulate dgx-h100 --root COPY``: NVML and commands come from the
simulator, every file from the broken tree. The property, each time: the command answers
within its deadlines, every source and check the fault does not touch reports exactly what
it reports on the healthy tree, and the affected values are null with the reason in
``clusterdiag snapshot``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.tree import write_tree
from tests.conftest import run_cli

Report = dict[str, Any]
Key = tuple[str, str]
HCA = "mlx5_3"  # a compute HCA of the simulated DGX H100 (beside GPU 1)
PORT = f"sys/class/infiniband/{HCA}/ports/1"
# A source of the healthy tree takes well under a second; the slowest source deadline is 6 s.
# Times are the sources' own (the report's ``sources.*.seconds``), not the command's wall
# clock: interpreter start-up on a loaded machine is not what these tests are about. The
# slack is for a loaded 2-core machine; what a hang would cost is far beyond it.
QUICK_S = 10.0
HANG = "exec sleep 40"  # a command that never answers in time (its limit is 3 s)


def _slowest_source(report: Report) -> float:
    return max(float(source["seconds"]) for source in report["sources"].values())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pristine")
    write_tree(build(NodeSpec("n1", "dgx-h100")), root)
    return root


@pytest.fixture
def tree(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(pristine, copy, symlinks=True)
    return copy


def _json(*args: str, env: dict[str, str] | None = None) -> Report:
    proc = run_cli(*args, "--format", "json", env=env) if args[0] == "run" else \
        run_cli(*args, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    report: Report = json.loads(proc.stdout)
    return report


def _sim_run(root: Path, *extra: str) -> Report:
    return _json("run", "--simulate", "dgx-h100", "--root", str(root), *extra)


def _sim_snapshot(root: Path) -> Report:
    return _json("snapshot", "--simulate", "dgx-h100", "--root", str(root))


@pytest.fixture(scope="module")
def healthy(pristine: Path) -> Report:
    return _sim_run(pristine)


def _results(report: Report) -> dict[Key, tuple[str, str]]:
    return {(f["check"], f["component"]): (f["status"], f["message"])
            for f in report["findings"]}


def _changed(before: Report, after: Report) -> set[Key]:
    """The (check, component) pairs whose result differs, appeared or went away."""
    old, new = _results(before), _results(after)
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def _assert_intact(before: Report, after: Report, touched: Callable[[Key], bool]) -> None:
    """Everything outside ``touched`` is as on the healthy node, and every source ran."""
    stray = sorted(k for k in _changed(before, after) if not touched(k))
    assert not stray, stray
    assert set(after["sources"]) == set(before["sources"])
    bad = {k: v for k, v in after["sources"].items() if v["status"] != "ok"}
    assert not bad, bad


def _device(snap: Report, name: str) -> Report:
    return next(d for d in snap["infiniband"] if d["name"] == name)


def _about_hca(key: Key) -> bool:
    return key[0].startswith("ib.") or key[0] == "nccl.gpu_nic_affinity"


# -- a device that disappears between listing and reading --------------------------------

def test_hca_unplugged_after_listing_is_an_unknown_device(tree: Path, healthy: Report) -> None:
    """The class link still lists the HCA but its directory is gone (hot-unplug between
    readdir and open): one device with every value unknown, never a lost source."""
    shutil.rmtree((tree / "sys/class/infiniband" / HCA).resolve())
    report = _sim_run(tree)
    assert _slowest_source(report) < QUICK_S
    _assert_intact(healthy, report, _about_hca)
    assert _results(report)[("ib.hca_count", "node")][0] == "fail"
    dev = _device(_sim_snapshot(tree), HCA)
    assert dev["fw_ver"] is None
    assert dev["unknown"]["fw_ver"] == "missing"
    assert dev["ports"] == []
    others = [d for d in _sim_snapshot(tree)["infiniband"] if d["name"] != HCA]
    assert len(others) == 11
    assert all(p["state"] == "ACTIVE" for d in others for p in d["ports"])


def test_port_unplugged_after_listing_costs_that_port(tree: Path, healthy: Report) -> None:
    port = (tree / PORT).resolve()
    shutil.rmtree(port)
    port.symlink_to("/nonexistent/clusterdiag-test")
    report = _sim_run(tree)
    _assert_intact(healthy, report, lambda k: k[1] == f"{HCA}/1")
    assert _results(report)[("ib.port_state", f"{HCA}/1")] == ("error", "port state unknown")
    (port_data,) = _device(_sim_snapshot(tree), HCA)["ports"]
    assert port_data["state"] is None
    assert port_data["unknown"]["state"] == "missing"


def test_gpu_unplugged_from_pci_after_listing(tree: Path, pristine: Path) -> None:
    """The GPU's bus link is listed but dangling: PCI shows seven GPUs, NVML eight, and
    gpu.count fails. The NIC beside it (mlx5_0) no longer shares a switch with a GPU, so
    it stops counting as a compute rail and GPU 0 has no rail; nothing else changes."""
    bdf = "0000:1b:00.0"
    shutil.rmtree((tree / "sys/bus/pci/devices" / bdf).resolve())
    before = _sim_run(pristine, "--profile", "dgx-h100")
    after = _sim_run(tree, "--profile", "dgx-h100")
    _assert_intact(before, after, lambda k: k[0] in ("gpu.count", "ib.hca_count")
                   or k[1] in ("mlx5_0", "mlx5_0/1")
                   or k in {("nccl.gpu_nic_affinity", "gpu0"), ("nccl.gpu_nic_affinity", "node")})
    assert _results(after)[("gpu.count", "node")][0] == "fail"
    assert bdf not in {d["bdf"] for d in _sim_snapshot(tree)["pci"]}


# -- a file that cannot be read ----------------------------------------------------------

def _make_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _make_dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to("nowhere")


def _make_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _nic_vendor(tree: Path) -> Path:
    bdf = os.path.basename(os.path.realpath(tree / f"sys/class/infiniband/{HCA}/device"))
    return tree / "sys/bus/pci/devices" / bdf / "vendor"


# (what breaks, how, which results may change, where the snapshot records it, the reason)
UNREADABLE: dict[str, tuple[Callable[[Path], Path], Callable[[Path], None],
                            Callable[[Key], bool], Callable[[Report], dict[str, str]], str,
                            str]] = {
    "rate is a directory": (
        lambda t: t / PORT / "rate", _make_dir, lambda k: k == ("ib.rate", f"{HCA}/1"),
        lambda s: _device(s, HCA)["ports"][0]["unknown"], "rate", "is a directory"),
    "state is a dangling link": (
        lambda t: t / PORT / "state", _make_dangling, lambda k: k[1] == f"{HCA}/1",
        lambda s: _device(s, HCA)["ports"][0]["unknown"], "state", "missing"),
    "IB counter is a FIFO": (
        lambda t: t / PORT / "counters/symbol_error", _make_fifo, lambda k: False,
        lambda s: _device(s, HCA)["ports"][0]["unknown"], "counters/symbol_error",
        "not a regular file"),
    "meminfo is a FIFO": (  # MemTotal also scales a percentage memlock limit (NCCL host)
        lambda t: t / "proc/meminfo", _make_fifo, lambda k: k == ("nccl.host_limits", "node"),
        lambda s: s["host"]["unknown"], "memory_total_bytes",
        "/proc/meminfo: not a regular file"),
    "NIC vendor is a FIFO": (
        _nic_vendor, _make_fifo, lambda k: False,
        lambda s: next(d for d in s["pci"] if d["vendor"] == 0)["unknown"], "vendor",
        "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_file_costs_one_value(case: str, tree: Path, healthy: Report) -> None:
    """Tests run as root, so chmod stops nothing: a directory, a dangling link or a FIFO
    with no writer stands where a file is expected. A FIFO used to block open() until the
    source's deadline and cost the whole source (every IB, or every host check)."""
    where, breaks, touched, unknown, key, reason = UNREADABLE[case]
    breaks(where(tree))
    report = _sim_run(tree)
    assert _slowest_source(report) < QUICK_S
    _assert_intact(healthy, report, touched)
    assert unknown(_sim_snapshot(tree))[key] == reason


def test_endless_kmsg_device_is_cut_off(tree: Path, healthy: Report) -> None:
    """A dev/kmsg that never runs dry (/dev/zero) would be read into memory for as long as
    the process lived (~1 GB in 3 s, past the deadline): the read stops with a reason, and
    only the kernel-log checks say they could not tell."""
    kmsg = tree / "dev/kmsg"
    kmsg.unlink()
    kmsg.symlink_to("/dev/zero")
    report = _sim_run(tree)
    assert _slowest_source(report) < QUICK_S
    kernel_checks = {"host.kernel_errors", "host.cper", "ib.kernel_errors", "nvswitch.sxid",
                     "gpu.xid"}
    _assert_intact(healthy, report, lambda k: k[0] in kernel_checks)
    assert _results(report)[("host.kernel_errors", "node")] == ("error", "kernel log unreadable")
    assert "not a ring buffer" in _sim_snapshot(tree)["kernel_log"]["unknown"]["kmsg"]


# -- an NVML call that fails on one GPU only ---------------------------------------------

def test_unnamed_nvml_error_on_one_gpu_leaves_the_others(tmp_path: Path) -> None:
    """Error code 12345 has no NVMLError_* class in the bindings; it fails the temperature
    of GPU 2 and the whole field batch of GPU 5, and nothing of GPUs 0, 1, 3, 4, 6, 7."""
    healthy_spec, faulty_spec = tmp_path / "healthy.yaml", tmp_path / "faulty.yaml"
    healthy_spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n")
    faulty_spec.write_text(
        "nodes:\n  - {names: n1, profile: dgx-h100}\nfaults:\n"
        "  - {node: n1, kind: nvml_call_error, gpu: 2, function: nvmlDeviceGetTemperature,"
        " error: 12345}\n"
        "  - {node: n1, kind: nvml_call_error, gpu: 5, function: nvmlDeviceGetFieldValues,"
        " error: 12345}\n")
    before = _json("run", "--simulate", str(healthy_spec))
    after = _json("run", "--simulate", str(faulty_spec))
    _assert_intact(before, after, lambda k: k[1] in ("gpu2", "gpu5"))
    results = _results(after)
    assert results[("gpu.responsive", "gpu2")] == ("fail", "NVML calls fail on this GPU")
    assert results[("gpu.responsive", "gpu5")] == ("fail", "NVML calls fail on this GPU")
    gpus = _json("snapshot", "--simulate", str(faulty_spec))["nvml"]["gpus"]
    assert gpus[2]["temperature_c"] is None
    assert "12345" in gpus[2]["errors"]["temperature_c"]
    assert gpus[2]["ecc_volatile_uncorrected"] is not None
    assert gpus[5]["ecc_volatile_uncorrected"] is None
    assert "12345" in gpus[5]["errors"]["fields"]
    assert all(not g["errors"] for i, g in enumerate(gpus) if i not in (2, 5))


# -- slow sources: within the deadline, and past it ---------------------------------------

def _fake_commands(directory: Path, scripts: dict[str, str]) -> dict[str, str]:
    """Programs found before the real ones: the host source runs them through PATH."""
    directory.mkdir()
    for name, body in scripts.items():
        program = directory / name
        program.write_text(f"#!/bin/sh\n{body}\n")
        program.chmod(0o755)
    return {"PATH": f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"}


def _root_run(root: Path, env: dict[str, str], *extra: str) -> Report:
    """Real command runner (no simulator): sysfs from the tree, NVML as this machine has."""
    return _json("run", "--root", str(root), "--profile", "dgx-h100", *extra, env=env)


def test_slow_source_within_its_deadline_is_waited_for(pristine: Path, tmp_path: Path) -> None:
    before = _root_run(pristine, _fake_commands(tmp_path / "fast", {"timedatectl": "echo yes"}))
    slow = _fake_commands(tmp_path / "slow", {"timedatectl": "sleep 1.5; echo yes"})
    after = _root_run(pristine, slow)
    assert 1.5 <= after["sources"]["host"]["seconds"] < 1.5 + QUICK_S
    _assert_intact(before, after, lambda k: False)
    assert _results(after)[("host.clock_sync", "node")] == ("pass", "clock synchronised")


def test_hung_commands_cost_the_clock_not_the_host_source(pristine: Path,
                                                          tmp_path: Path) -> None:
    """timedatectl hangs (3 s command limit), then chronyc gets what is left of the host
    source's 4 s. Commands used to run to the very deadline, so the source returned just
    after the runner stopped waiting and every host check lost its data."""
    before = _root_run(pristine, _fake_commands(tmp_path / "ok", {"timedatectl": "echo yes"}))
    after = _root_run(pristine, _fake_commands(
        tmp_path / "hang", {"timedatectl": HANG, "chronyc": HANG}))
    assert after["sources"]["host"]["seconds"] < 4.0 + QUICK_S
    _assert_intact(before, after, lambda k: k == ("host.clock_sync", "node"))
    status, message = _results(after)[("host.clock_sync", "node")]
    assert status == "error"
    clock = next(f for f in after["findings"] if f["check"] == "host.clock_sync")
    assert "timedatectl: no answer within 3 s" in str(clock["observed"])
    assert message


def test_source_past_its_deadline_is_dropped_with_the_reason(tmp_path: Path) -> None:
    """GPU 5 blocks in the driver for good: the NVML source gives up on it at its 6 s
    deadline, says which GPU never answered, and keeps the seven that did."""
    healthy_spec, hung_spec = tmp_path / "healthy.yaml", tmp_path / "hung.yaml"
    healthy_spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n")
    hung_spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                         "faults:\n  - {node: n1, kind: gpu_hang, gpu: 5}\n")
    before = _json("run", "--simulate", str(healthy_spec))
    after = _json("run", "--simulate", str(hung_spec))
    assert after["sources"]["nvml"]["seconds"] < 6.0 + QUICK_S
    source = after["sources"]["nvml"]
    assert (source["status"], source["error"]) == ("timeout", "no answer from GPU(s) 5")
    stray = sorted(k for k in _changed(before, after) if k[1] != "gpu5")
    assert not stray, stray
    assert _results(after)[("gpu.responsive", "gpu5")][0] == "fail"
    assert all(v["status"] == "ok" for k, v in after["sources"].items() if k != "nvml")
