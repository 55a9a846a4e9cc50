"""A device the agent is denied is our trouble, said loudly: an ``error`` naming the device
and the unit's setting, never a skip, never a hardware ``fail`` (a node drained or rebooted
for our own sandbox)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import kernel_log
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status


@pytest.mark.parametrize("profile", ["dgx-h100", "gb200-nvl72"])
def test_gpus_denied_to_nvml_are_an_error_naming_the_unit_setting(profile: str) -> None:
    spec = NodeSpec("n1", profile, rack="rack1" if "nvl72" in profile else None,
                    faults=[{"node": "n1", "kind": "device_denied"}])
    report = run_node(env_for(spec), Config(), RunOptions(level="quick", profile=profile,
                                                          budget_s=20))
    responsive = [f for f in report.findings if f.check == "gpu.responsive"]
    assert [(f.status, f.component) for f in responsive] == [(Status.ERROR, "node")]
    message = responsive[0].message
    for named in ("/dev/nvidia0", "/dev/nvidiactl", "DeviceAllow=",
                  "clusterdiag-agent.service", "char-nvidia", "char-nvidia-frontend"):
        assert named in message, named
    assert responsive[0].observed["error"] == "NoPermission"
    assert not [f for f in report.findings if f.status is Status.FAIL], \
        [(f.check, f.message) for f in report.findings if f.status is Status.FAIL]


@pytest.mark.parametrize("code", [errno.EPERM, errno.EACCES])
def test_kmsg_denied_names_the_device_and_the_unit_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """A cgroup device policy refuses the open with EPERM, a file mode with EACCES
    (Linux Documentation/admin-guide/cgroup-v1/devices.rst; open(2))."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text("")
    real_open = os.open

    def denied(path: object, flags: int, *args: object, **kw: object) -> int:
        if str(path).endswith("/dev/kmsg"):
            raise OSError(code, os.strerror(code))
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel_log.os, "open", denied)
    log = kernel_log.read_kmsg(tmp_path, 600.0, now=1e9)
    reason = log.unknown["kmsg"]
    for named in ("/dev/kmsg", "DeviceAllow=/dev/kmsg r", "clusterdiag-agent.service",
                  "CAP_SYSLOG"):
        assert named in reason, named
    assert reason.startswith(errno.errorcode[code])


def test_gpus_denied_by_a_device_cgroup_are_ours_whatever_nvml_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A device cgroup that denies the GPUs makes nvmlInit answer "Unknown Error" rather
    than NO_PERMISSION (NVIDIA/nvidia-container-toolkit#48); the NVML worker then tries
    the device files, and open()'s EPERM (the cgroup's answer, Linux
    Documentation/admin-guide/cgroup-v1/devices.rst) makes it an error, not a reboot."""
    spec = NodeSpec("n1", "dgx-h100", faults=[{"node": "n1", "kind": "driver_not_loaded"}])
    env = env_for(spec)
    dev = env.root / "dev"
    dev.mkdir(exist_ok=True)
    for name in ("nvidiactl", "nvidia0", "nvidia1", "nvidia-uvm"):
        (dev / name).write_text("")
    real_open = os.open

    def cgroup(path: object, flags: int, *args: object, **kw: object) -> int:
        if str(path).endswith(("/dev/nvidia0", "/dev/nvidia1")):
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", cgroup)  # the forked NVML worker inherits it
    report = run_node(env, Config(), RunOptions(level="quick", profile="dgx-h100",
                                                budget_s=20))
    (responsive,) = [f for f in report.findings if f.check == "gpu.responsive"]
    assert responsive.status is Status.ERROR, responsive
    assert "/dev/nvidia0: Operation not permitted" in responsive.message
    assert "DeviceAllow=" in responsive.message
    assert not [f for f in report.findings if f.status is Status.FAIL]
    # Without the denial the same driver failure is the hardware's: a fail.
    monkeypatch.setattr(os, "open", real_open)
    report = run_node(env, Config(), RunOptions(level="quick", profile="dgx-h100",
                                                budget_s=20))
    (responsive,) = [f for f in report.findings if f.check == "gpu.responsive"]
    assert responsive.status is Status.FAIL
