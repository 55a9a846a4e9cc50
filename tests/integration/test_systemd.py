"""The agent's unit file: ``systemd-analyze verify`` clean, its security exposure
reported, and a real boot under systemd-nspawn (tests/integration/nspawn.py) that shows the agent
``active (running)`` as Type=notify with its watchdog fed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.nspawn import container_init

UNIT = REPO / "systemd" / "clusterdiag-agent.service"
INSTALLED = "/usr/local/bin/clusterdiag"


def _unit_for_host(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this checkout's clusterdiag: verify checks
    that the program exists on the machine that runs it."""
    script = shutil.which("clusterdiag") or str(Path(sys.executable).parent / "clusterdiag")
    unit = tmp_path / "clusterdiag-agent.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, script))
    return unit


@pytest.fixture
def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze not installed")
    return tool


def test_unit_names_the_installed_program() -> None:
    text = UNIT.read_text()
    assert f"ExecStart={INSTALLED} agent" in text
    for key in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "StateDirectory=",
                "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                "NoNewPrivileges=yes", "DevicePolicy=closed", "RestrictAddressFamilies=",
                "MemoryMax=", "CPUQuota="):
        assert key in text, key
    assert "PrivateDevices=yes" not in text  # it would hide /dev/nvidia*
    assert "ProtectKernelLogs=yes" not in text  # Xid detection reads the kernel log


def test_systemd_analyze_verify_has_no_warnings(tmp_path: Path, analyze: str) -> None:
    proc = subprocess.run([analyze, "verify", str(_unit_for_host(tmp_path))],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
    assert proc.stderr.strip() == ""


def test_systemd_analyze_security_exposure(tmp_path: Path, analyze: str,
                                           record_property: pytest.RecordProperty) -> None:
    proc = subprocess.run([analyze, "security", "--offline=yes", "--no-pager",
                           str(_unit_for_host(tmp_path))],
                          capture_output=True, text=True, check=False, timeout=60)
    line = next((x for x in proc.stdout.splitlines() if "Overall exposure level" in x), "")
    assert line, proc.stdout + proc.stderr
    score = float(line.split(":", 1)[1].split()[0])
    print(f"\nsystemd-analyze security --offline=yes: {line.split('→')[-1].strip()}")
    record_property("systemd_exposure", score)
    assert score <= 3.0  # "OK"; an unhardened service scores 9.2 (UNSAFE)


# The code and its dependencies are bound at neutral paths inside the container: a
# checkout under /tmp (as CI's is) would vanish behind the unit's PrivateTmp, and the
# editable install's finder points at the checkout's absolute paths.
SOURCES_AT, SITE_AT, PYTHON_AT = "/opt/cd-src", "/opt/cd-site", "/opt/cd-python"
PACKAGES = ("agent", "checks", "reports")


def _code_binds() -> list[str]:
    site = sysconfig.get_paths()["purelib"]
    binds = [f"--bind-ro={REPO / name}:{SOURCES_AT}/clusterdiag/{name}" for name in PACKAGES]
    binds += [f"--bind-ro={site}:{SITE_AT}", f"--bind-ro={sys.base_prefix}:{PYTHON_AT}"]
    return binds


def _drop_in(sandbox: Path) -> Path:
    """Run this checkout's code on a simulated node, as root (the container has no
    clusterdiag user), with a short watchdog so the test sees it fed several times."""
    exe = f"{PYTHON_AT}/bin/{Path(os.path.realpath(sys.executable)).name}"
    code = (f"import sys; sys.path[:0] = ['{SOURCES_AT}', '{SITE_AT}']; "
            "sys.argv[0] = 'clusterdiag'; from clusterdiag.agent.cli import main; main()")
    args = "agent --simulate dgx-h100 --interval 1 --listen 127.0.0.1:9464"
    drop = sandbox / "clusterdiag-agent.service.d"
    drop.mkdir(parents=True)
    (drop / "test.conf").write_text(
        "[Service]\nUser=\nGroup=\nSupplementaryGroups=\nWatchdogSec=3s\n"
        f"Environment=LD_LIBRARY_PATH={PYTHON_AT}/lib\n"  # a non-system Python's libpython
        f'ExecStart=\nExecStart={exe} -I -c "{code}" {args}\n')
    return drop


def _inside(init: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nsenter", "-t", str(init), "-a", *argv], capture_output=True,
                          text=True, check=False, timeout=30)


@pytest.mark.slow
def test_boots_under_systemd_nspawn_with_watchdog(tmp_path: Path) -> None:
    nspawn = shutil.which("systemd-nspawn")
    if nspawn is None:
        pytest.skip("systemd-nspawn not installed (apt-get install systemd-container)")
    if os.geteuid() != 0:
        pytest.skip("systemd-nspawn needs root")
    wants = tmp_path / "wants"
    wants.mkdir()
    (wants / "clusterdiag-agent.service").symlink_to(
        "/etc/systemd/system/clusterdiag-agent.service")
    drop = _drop_in(tmp_path)
    # Masked like firstboot: with a private network, wait-online would hold the boot
    # (and the agent's After=network-online.target) for two minutes.
    binds = [*_code_binds(), "--bind-ro=/dev/null:/etc/systemd/system/"
             "systemd-firstboot.service",
             "--bind-ro=/dev/null:/etc/systemd/system/systemd-networkd-wait-online.service",
             f"--bind-ro={UNIT}:/etc/systemd/system/clusterdiag-agent.service",
             f"--bind-ro={drop}:/etc/systemd/system/clusterdiag-agent.service.d",
             f"--bind-ro={wants}:/etc/systemd/system/multi-user.target.wants"]
    machine = f"cdtest{os.getpid()}"
    log = open(tmp_path / "nspawn.log", "w")  # noqa: SIM115 - closed below
    container = subprocess.Popen(
        [nspawn, "-D", "/", "--volatile=yes", "--private-network", "--register=no",
         "--keep-unit", "-M", machine, "--console=passive", *binds, "-b"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    try:
        init = container_init(container.pid, 30)
        deadline = time.monotonic() + 60
        show = ""
        while time.monotonic() < deadline:
            show = _inside(init, "systemctl", "show", "clusterdiag-agent", "-p",
                           "ActiveState,SubState,WatchdogUSec,NRestarts,StatusText").stdout
            if "SubState=running" in show:
                break
            time.sleep(0.5)
        assert "SubState=running" in show, show + _journal(init)
        time.sleep(8)  # more than two watchdog periods: a missed WATCHDOG=1 would kill it
        status = _inside(init, "systemctl", "status", "--no-pager", "clusterdiag-agent").stdout
        show = _inside(init, "systemctl", "show", "clusterdiag-agent", "-p",
                       "ActiveState,SubState,WatchdogUSec,NRestarts,StatusText").stdout
        print("\n" + status)
        assert "active (running)" in status, status + _journal(init)
        assert "WatchdogUSec=3s" in show
        assert "NRestarts=0" in show, show + _journal(init)
        assert "StatusText=verdict pass" in show, show
    finally:
        container.send_signal(signal.SIGTERM)  # a clean poweroff of the container
        try:
            container.wait(30)
        except subprocess.TimeoutExpired:
            container.kill()
            container.wait(10)
        log.close()


def _journal(init: int) -> str:
    return _inside(init, "journalctl", "--no-pager", "-u", "clusterdiag-agent", "-n",
                   "40").stdout
