"""The offline bundle installed where the operator says: every path given to install.sh
(``--bin-dir``, ``--config-dir``, ``--state-dir``, ...) is the one the unit, the Slurm
wrapper and the default config name, and the installed wrapper runs the installed program,
which drains a faulty node through ``scontrol`` as slurmd would run it. The install is
pip's ``--no-index --require-hashes`` from the bundle's own wheels, pinned by the lock.

The bundle is built once per session, and shared with test_bundle.py where it is the same
(tests/integration/bundles.py; deploy/bundle/build.py downloads the lock's wheels: the
package index, or pip's cache of them, must be reachable); every install is into this
test's temporary directory, with no root, no user and no systemd."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.integration.bundles import Shelf
from tests.integration.test_prolog_cli import SPEC, VERDICT_BUDGET_S, Slurm

# Shares its bundle with the other wheel tests (tests/integration/bundles.py): one after
# another on one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, bundle_shelf: Shelf) -> Path:
    """This Python's bundle for this machine (build.py's default architecture is
    ``platform.machine()``: deploy/bundle/build.py, ``_arguments``), unpacked."""
    tmp = tmp_path_factory.mktemp("bundle")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    built = bundle_shelf.bundles(platform.machine(), python)[python]
    with tarfile.open(built) as tar:
        tar.extractall(tmp)  # our own build
    return tmp / built.name.removesuffix(".tar.gz")


def _install(bundle: Path, root: Path) -> subprocess.CompletedProcess[str]:
    """install.sh with every path moved under ``root``, run by this Python's base
    interpreter (what /usr/bin/python3.X is on a node)."""
    return subprocess.run(
        [str(bundle / "install.sh"), "--prefix", str(root / "opt"),
         "--bin-dir", str(root / "bin"), "--config-dir", str(root / "etc"),
         "--unit-dir", str(root / "units"), "--slurm-dir", str(root / "slurm"),
         "--state-dir", str(root / "state"), "--no-user"],
        capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "CLUSTERDIAG_PYTHON": sys.executable})


def _prolog(root: Path, slurm: Slurm) -> subprocess.CompletedProcess[str]:
    """The installed prolog link as slurmd runs it, with the stand-in scontrol first on
    PATH (it needs cat from the system's directories)."""
    env = {"SLURMD_NODENAME": "n2", "SLURM_JOB_ID": "4711", "SLURM_JOB_USER": "alice",
           "PATH": f"{slurm.dir}:/usr/bin:/bin", "CLUSTERDIAG_LOG": str(root / "prolog.log")}
    return subprocess.run([str(root / "slurm/clusterdiag-prolog.sh"), "--simulate",
                           str(root / "spec.yaml")], capture_output=True, text=True,
                          check=False, timeout=120, env=env, cwd="/")


def test_a_relocated_install_names_its_paths_and_its_prolog_drains_a_faulty_node(
        bundle: Path, tmp_path: Path) -> None:
    proc = _install(bundle, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    program = tmp_path / "bin/clusterdiag"
    config = tmp_path / "etc/config.yaml"

    unit = (tmp_path / "units/clusterdiag-agent.service").read_text()
    assert f"ExecStart={program} agent --config {config}\n" in unit
    assert f"ReadWritePaths={tmp_path / 'state'}\n" in unit
    assert "/usr/local/bin" not in unit
    assert "/etc/clusterdiag" not in unit
    analyze = shutil.which("systemd-analyze")
    if analyze:  # verify also checks that ExecStart's program exists
        verified = subprocess.run(
            [analyze, "verify", str(tmp_path / "units/clusterdiag-agent.service")],
            capture_output=True, text=True, check=False, timeout=60)
        assert verified.returncode == 0, verified.stderr
    settings = yaml.safe_load(config.read_text())
    assert settings["agent"]["state_dir"] == str(tmp_path / "state")
    assert settings["profile_dir"] == str(tmp_path / "etc/profiles")
    assert (tmp_path / "state").is_dir()

    wrapper = (tmp_path / "slurm/clusterdiag-prolog.sh").resolve()
    assert wrapper.is_relative_to(tmp_path / "opt/versions")
    text = wrapper.read_text()
    assert f"CLUSTERDIAG=${{CLUSTERDIAG:-{program}}}" in text
    assert f"CONFIG=${{CLUSTERDIAG_CONFIG:-{config}}}" in text

    # The installed config, with room for a loaded machine, is what the prolog reads.
    settings["prolog"]["budget_s"] = VERDICT_BUDGET_S
    config.write_text(yaml.safe_dump(settings))
    (tmp_path / "spec.yaml").write_text(SPEC)
    slurm = Slurm(tmp_path)
    slurm.node("n2", "IDLE")
    hook = _prolog(tmp_path, slurm)
    log = (tmp_path / "prolog.log").read_text()
    assert hook.returncode == 1, hook.stderr + log
    assert "clusterdiag prolog: FAIL node not ready" in log, log
    assert f"no agent report at {tmp_path / 'state/report.json'}" in log  # the given state
    assert [u[3] for u in slurm.updates()] == [
        "Reason=clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"]


def test_an_installed_wrapper_whose_program_is_gone_says_so_and_exits_0(
        bundle: Path, tmp_path: Path) -> None:
    """docs/design.md §3: our own trouble exits 0 (no drain) with a loud line, on the
    prolog's stderr (the job's prolog log) and in its log."""
    proc = _install(bundle, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    program = tmp_path / "bin/clusterdiag"
    program.unlink()
    (tmp_path / "spec.yaml").write_text(SPEC)
    slurm = Slurm(tmp_path)
    hook = _prolog(tmp_path, slurm)
    assert hook.returncode == 0, hook.stderr
    line = f"clusterdiag prolog: ERROR {program} is not an executable program"
    assert line in hook.stderr
    assert line in (tmp_path / "prolog.log").read_text()
    assert slurm.calls() == []


def test_the_bundle_installs_its_locked_wheels_with_require_hashes(bundle: Path,
                                                                   tmp_path: Path) -> None:
    """Offline, every wheel checked against the digest the bundle's requirements give: the
    lock's pins for this target, and the project's own wheel."""
    requirements = (bundle / "requirements.txt").read_text()
    wheels = sorted(w.name for w in (bundle / "wheels").glob("*.whl"))
    pinned = [line.split("==")[0] for line in requirements.splitlines()
              if not line.startswith(" ")]
    assert len(pinned) == len(wheels)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    (pip,) = (bundle / "wheels").glob("pip-*.whl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    installed = subprocess.run(
        [str(venv / "bin/python"), str(pip / "pip"), "install", "-q", "--no-index",
         "--find-links", str(bundle / "wheels"), "--require-hashes", "-r",
         str(bundle / "requirements.txt")],
        capture_output=True, text=True, check=False, timeout=300,
        env={**env, "PIP_CONFIG_FILE": os.devnull})
    assert installed.returncode == 0, installed.stderr
    # A wheel whose digest is not the pinned one is refused.
    tampered = tmp_path / "tampered.txt"
    digest = requirements.split("--hash=sha256:", 2)[1][:64]
    tampered.write_text(requirements.replace(digest, "0" * 64, 1))
    refused = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--no-index", "--force-reinstall",
         "--find-links", str(bundle / "wheels"), "--require-hashes", "-r", str(tampered)],
        capture_output=True, text=True, check=False, timeout=300,
        env={**env, "PIP_CONFIG_FILE": os.devnull})
    assert refused.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr
