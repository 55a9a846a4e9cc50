"""An OS error while reading the hardware is clusterdiag's trouble, never a missing part.
A run of a healthy simulated dgx-h100 in a child process whose descriptors
are used up (EMFILE, as an agent flooded with connections had) must report the counting
checks as ``error`` naming the cause, and fail nothing; the same for a sysfs directory it
may not list (EACCES, as a non-root user: root would read it anyway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import users

COUNTING = ("gpu.count", "ib.hca_count", "nvswitch.count")

# A child's lines that open /dev/null until the process is out of descriptors (``held``).
HOLD_EVERY_DESCRIPTOR = """
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
"""

# Builds the simulated node, runs once (imports, caches), then opens /dev/null until the
# process is out of descriptors, runs again and prints the findings once it has closed
# them again.
EXHAUST = """
import json, os, resource, sys
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.sim.node import simulated_env
env = simulated_env("dgx-h100", None, Config())
options = RunOptions(budget_s=20.0, profile="dgx-h100")
run_node(env, Config(), options)
""" + HOLD_EVERY_DESCRIPTOR + """
report = run_node(env, Config(), options)
for fd in held:
    os.close(fd)
print(json.dumps(report.to_dict()))
"""


def _findings(report: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    found: dict[str, list[dict[str, object]]] = {}
    for f in report["findings"]:  # type: ignore[attr-defined]
        found.setdefault(f["check"], []).append(f)
    return found


def test_out_of_descriptors_is_an_error_naming_it_never_missing_hardware() -> None:
    proc = subprocess.run([sys.executable, "-c", EXHAUST], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    by_check = _findings(report)
    fails = [f"{f['check']} {f['component']}: {f['message']}"
             for f in report["findings"] if f["status"] == "fail"]
    assert not fails, fails
    for check in COUNTING:
        statuses = {f["status"] for f in by_check[check]}
        assert statuses == {"error"}, (check, by_check[check])
        text = json.dumps(by_check[check])
        assert "Too many open files" in text, (check, text)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_pci_directory_that_cannot_be_listed_is_an_error_not_missing_gpus(
        tmp_path: Path) -> None:
    script = """
import json, os, sys
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.sim.node import simulated_env
from clusterdiag import checks
checks.load_all()  # every family imported while root may still read the checkout
from clusterdiag.agent.run import collect
for source in collect.MODULES:  # and every collector, which a run imports on first use
    collect.collector(source)
env = simulated_env("dgx-h100", None, Config())
devices = env.root / "sys/bus/pci/devices"
for path in (env.root, *devices.parents):
    if str(path).startswith(str(env.root)):
        os.chmod(path, 0o755)
os.chmod(devices, 0o000)
import encodings.ascii  # imported lazily, from a tree nobody may not read
os.setgid(65534)
os.setuid(65534)
report = run_node(env, Config(), RunOptions(budget_s=20.0, profile="dgx-h100"))
print(json.dumps(report.to_dict()))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, cwd="/")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    by_check = _findings(report)
    for check in ("gpu.count", "nvswitch.count"):
        assert {f["status"] for f in by_check[check]} == {"error"}, by_check[check]
        assert "Permission denied" in json.dumps(by_check[check])
    fails = [f"{f['check']} {f['component']}" for f in report["findings"]
             if f["status"] == "fail"]
    assert not [f for f in fails if f.split()[0] in COUNTING], fails


@pytest.mark.skipif(users.why_nobody_cannot_run_clusterdiag() is not None,
                    reason=users.why_nobody_cannot_run_clusterdiag() or "")
def test_run_that_could_read_nothing_exits_3(tmp_path: Path) -> None:
    """``run --root`` over a tree the user may not list: every source it needed failed,
    so the node was not judged at all: exit 3 (docs/design.md §3), with the report still printed."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="clusterdiag-unread-"))
    try:
        base.chmod(0o755)
        (base / "sys/bus/pci/devices").mkdir(parents=True)
        (base / "sys/bus/pci/devices").chmod(0o700)  # root's: nobody may not list it
        proc = subprocess.run(
            users.as_nobody(sys.executable, "-m", "clusterdiag.agent", "run", "--root",
                            str(base), "--profile", "dgx-h100", "--checks", "nvswitch.count",
                            "--format", "json"),
            capture_output=True, text=True, timeout=60, check=False, cwd="/")
    finally:
        import shutil

        shutil.rmtree(base)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    report = json.loads(proc.stdout)
    assert [f["status"] for f in report["findings"]] == ["error"]
    assert "Permission denied" in proc.stderr.strip().splitlines()[-1], proc.stderr


# Files of the host and NCCL-host collectors made to fail with EIO (a link to
# /proc/self/mem, which reads EIO at offset 0, even as root): each value they held must be
# an error naming the errno and the file, never a fail, a pass or a silent unknown.
EIO_FILES = ("proc/meminfo", "proc/driver/nvidia/version", "etc/security/limits.conf",
             "sys/kernel/iommu_groups/0/type")


def test_eio_on_host_files_is_an_error_naming_errno_and_path() -> None:
    from clusterdiag.agent.run.runner import RunOptions, run_node
    from clusterdiag.agent.settings.config import Config
    from clusterdiag.agent.sim.node import simulated_env

    env = simulated_env("dgx-h100", None, Config())
    root = env.root
    (root / "sys/module/nvidia_peermem/version").unlink()  # dma-buf decides: driver flavour
    (root / "sys/class/iommu/dmar0").mkdir(parents=True)
    bdf = next(p.name for p in (root / "sys/bus/pci/devices").iterdir())
    (root / "sys/kernel/iommu_groups/0/devices").mkdir(parents=True)
    (root / "sys/kernel/iommu_groups/0/devices" / bdf).mkdir()
    for name in EIO_FILES:
        (root / name).unlink(missing_ok=True)
        (root / name).symlink_to("/proc/self/mem")
    config = Config()
    config.data["checks"]["host.memory"] = {"min_gib": 1}
    checks = ("host.memory", "nccl.gpudirect_rdma", "nccl.host_limits", "nccl.iommu")
    report = run_node(env, config, RunOptions(budget_s=20.0, profile="dgx-h100",
                                              patterns=checks)).to_dict()
    by_check = _findings(report)
    for check, path in zip(checks, EIO_FILES, strict=True):
        node = [f for f in by_check[check] if f["component"] == "node"]
        assert [f["status"] for f in node] == ["error"], by_check[check]
        text = json.dumps(node)
        assert "(EIO)" in text, (check, text)
        assert f"/{path}" in text, (check, text)
    assert not [f for f in report["findings"] if f["status"] == "fail"], report["findings"]


# `clusterdiag snapshot` as a user runs it, in a child whose descriptors run out once the
# command's imports are done: it runs once to warm up, then again with every descriptor
# held (stdout and stderr stay open), and exits with what the command exited with.
SNAPSHOT_EXHAUSTED = """
import contextlib, io, os, resource, sys
import pynvml  # imported while files can still be opened, as any module the run needs
from clusterdiag.agent.cli import main
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import simulated_env
env = simulated_env("dgx-h100", None, Config())
sys.argv = ["clusterdiag", "snapshot", "--root", str(env.root), "--profile", "dgx-h100"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
""" + HOLD_EVERY_DESCRIPTOR + """
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
for fd in held:
    os.close(fd)
sys.exit(code)
"""


def test_snapshot_that_could_read_nothing_exits_3() -> None:
    """Out of descriptors, no source can read anything: the snapshot is still printed
    (each source's error in it) and the exit status is 3, clusterdiag's trouble, with one
    line naming the first source's error, as `run` does."""
    proc = subprocess.run([sys.executable, "-c", SNAPSHOT_EXHAUSTED], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    snap = json.loads(proc.stdout)
    statuses = {name: s["status"] for name, s in snap["sources"].items()}
    assert "error" in statuses.values(), statuses
    assert set(statuses.values()) <= {"error", "not_collected"}, statuses
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("clusterdiag: could not read the node: "), line
    assert "Too many open files" in line, line
