"""The offline bundle, end to end: built by ``deploy/bundle/build.py``, installed with the
network closed in a fresh root (a volatile systemd-nspawn machine: the host's /usr
read-only, an empty /etc, /opt and /usr/local, nothing but loopback), then ``clusterdiag
run``, the Slurm prolog link and the agent under its own unit from the installed form, an
upgrade to a newer bundle, and an uninstall that keeps config and state. The 3.10 bundle
installs on pyenv's 3.10 bound into the machine, as a node's own Python would be.

The aarch64 bundle is built (its wheels fetched for their platform, never run) and its
manifest and wheels checked: nothing here can run aarch64 code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.bundles import Shelf, build
from tests.integration.nspawn import booted, inside, require_nspawn

BUILD = REPO / "deploy" / "bundle" / "build.py"
SYSTEM_PYTHON = "/usr/bin/python3"
PY310_AT = "/opt/python3.10"  # where pyenv's 3.10 is bound inside the machine
COPIED = ("agent", "checks", "reports", "systemd", "deploy", "pyproject.toml", "README.md")
HEALTHZ = ("import urllib.request; "
           "print(urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=5).status)")

# The wheel tests share their builds (tests/integration/bundles.py): one after another on
# one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def _minor(python: str) -> str:
    return subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _pyenv_310() -> Path | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = sorted(root.glob("versions/3.10.*/bin/python3.10"))
    return found[-1].parents[1] if found else None


def _newer_source(tmp: Path) -> Path:
    """This checkout with a later version number: what an upgrade brings."""
    source = tmp / "newer"
    for name in COPIED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    pyproject = source / "pyproject.toml"
    old = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.M)
    assert old is not None
    new = f"{old[1]}.post1"
    pyproject.write_text(pyproject.read_text().replace(old[0], f'version = "{new}"'))
    return source


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory, bundle_shelf: Shelf) -> dict[str, Path]:
    """The system Python's bundle (and pyenv's 3.10's) from the session's shelf, and the
    upgrade beside them: the machine sees that one folder as /srv/bundles."""
    require_nspawn()
    tmp = tmp_path_factory.mktemp("bundles")
    minor = _minor(SYSTEM_PYTHON)
    built = bundle_shelf.bundles("x86_64", minor, *(["3.10"] if _pyenv_310() else []))
    (upgrade,) = build(_newer_source(tmp), bundle_shelf.out, "--arch", "x86_64",
                       "--python", minor)
    found = {"system": built[minor], "upgrade": upgrade}
    if "3.10" in built:
        found["py310"] = built["3.10"]
    return found


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _install(init: int, bundle: Path, *args: str, env: dict[str, str] | None = None) -> str:
    name = bundle.name.removesuffix(".tar.gz")
    _ok(inside(init, "tar", "xzf", f"/srv/bundles/{bundle.name}", "-C", "/root"))
    return _ok(inside(init, f"/root/{name}/install.sh", *args, env=env, timeout=300))


def _wait_agent(init: int, env: dict[str, str] | None = None) -> str:
    deadline = time.monotonic() + 60
    show = ""
    while time.monotonic() < deadline:
        show = inside(init, "systemctl", "show", "clusterdiag-agent", "-p",
                      "ActiveState,SubState,NRestarts,StatusText").stdout
        if "SubState=running" in show:
            break
        time.sleep(0.5)
    journal = inside(init, "journalctl", "--no-pager", "-u", "clusterdiag-agent", "-n",
                     "30").stdout
    assert "SubState=running" in show, show + journal
    assert _ok(inside(init, SYSTEM_PYTHON, "-c", HEALTHZ, env=env)).strip() == "200"
    return show


def _run_simulated(init: int, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = inside(init, "/usr/local/bin/clusterdiag", "run", "--simulate", "dgx-h100",
                  "--format", "json", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def test_installs_runs_upgrades_and_uninstalls_offline(bundles: dict[str, Path],
                                                      tmp_path: Path) -> None:
    binds = [f"--bind-ro={bundles['system'].parent}:/srv/bundles", "--tmpfs=/usr/local"]
    with booted(tmp_path / "nspawn.log", *binds) as init:
        links = _ok(inside(init, "ip", "-o", "link")).splitlines()
        assert [line.split(":")[1].strip() for line in links] == ["lo"]  # network closed

        out = _install(init, bundles["system"])
        assert "wrote the default /etc/clusterdiag/config.yaml" in out
        target = _ok(inside(init, "readlink", "/usr/local/bin/clusterdiag")).strip()
        assert target == "/opt/clusterdiag/current/bin/clusterdiag"
        first = _ok(inside(init, "readlink", "/opt/clusterdiag/current")).strip()
        assert first.startswith("versions/0.1.0-py")
        report = _run_simulated(init)
        assert report["verdict"] == "pass"
        # This machine itself, from the installed form: a report (GPU families skip).
        real = inside(init, "clusterdiag", "run", "--format", "json", timeout=120)
        assert real.returncode in (0, 1), real.stderr
        assert json.loads(real.stdout)["schema"] == "clusterdiag/node-report/v1"
        # The Slurm hook through its link, as slurmd runs it: no PATH, the node's name.
        hook = subprocess.run(
            ["nsenter", "-t", str(init), "-a", "env", "-i", "SLURMD_NODENAME=n1",
             "SLURM_JOB_ID=7", "CLUSTERDIAG_LOG=/tmp/prolog.log",
             "/etc/slurm/clusterdiag-prolog.sh", "--simulate", "dgx-h100"],
            capture_output=True, text=True, check=False, timeout=60)
        assert hook.returncode == 0, hook.stderr + inside(init, "cat", "/tmp/prolog.log").stdout

        inside(init, "systemctl", "enable", "--now", "clusterdiag-agent", timeout=90)
        _wait_agent(init)
        assert _ok(inside(init, "ls", "/var/lib/clusterdiag")).split().count("report.json") == 1
        _ok(inside(init, "sh", "-c", "echo '# site edit' >> /etc/clusterdiag/config.yaml"))

        out = _install(init, bundles["upgrade"])
        assert "kept /etc/clusterdiag/config.yaml" in out
        second = _ok(inside(init, "readlink", "/opt/clusterdiag/current")).strip()
        assert second != first
        assert ".post1-py" in second
        version = _ok(inside(init, "clusterdiag", "--version"))
        assert ".post1" in version
        kept = _ok(inside(init, "ls", "/opt/clusterdiag/versions")).split()
        assert sorted(kept) == sorted([Path(first).name, Path(second).name])  # rollback
        _wait_agent(init)  # restarted: its interpreter is the new version's venv
        pid = _ok(inside(init, "systemctl", "show", "-p", "MainPID", "--value",
                         "clusterdiag-agent")).strip()
        cmdline = _ok(inside(init, "cat", f"/proc/{pid}/cmdline"))
        assert f"/opt/clusterdiag/{second}/bin/python" in cmdline, cmdline
        assert "# site edit" in _ok(inside(init, "cat", "/etc/clusterdiag/config.yaml"))

        out = _ok(inside(init, "/opt/clusterdiag/current/share/clusterdiag/install.sh",
                         "uninstall"))
        assert "kept /etc/clusterdiag" in out
        for gone in ("/opt/clusterdiag", "/usr/local/bin/clusterdiag",
                     "/etc/systemd/system/clusterdiag-agent.service",
                     "/etc/slurm/clusterdiag-prolog.sh"):
            assert inside(init, "test", "-L", gone).returncode != 0, gone
            assert inside(init, "test", "-e", gone).returncode != 0, gone
        assert "# site edit" in _ok(inside(init, "cat", "/etc/clusterdiag/config.yaml"))
        assert "report.json" in _ok(inside(init, "ls", "/var/lib/clusterdiag"))
        assert inside(init, "systemctl", "is-active", "clusterdiag-agent").stdout.strip() \
            != "active"


def test_the_310_bundle_installs_on_a_310_python(bundles: dict[str, Path],
                                                 tmp_path: Path) -> None:
    python = _pyenv_310()
    if "py310" not in bundles or python is None:
        pytest.skip("no Python 3.10 under pyenv to stand for the node's own")
    # pyenv's build finds libpython through a RUNPATH under /root, which the unit's
    # ProtectHome hides; a node's /usr/bin/python3.10 needs none of this.
    env = {"CLUSTERDIAG_PYTHON": f"{PY310_AT}/bin/python3.10",
           "LD_LIBRARY_PATH": f"{PY310_AT}/lib"}
    drop = tmp_path / "clusterdiag-agent.service.d"
    drop.mkdir()
    (drop / "python.conf").write_text(
        f"[Service]\nEnvironment=LD_LIBRARY_PATH={PY310_AT}/lib\n")
    binds = [f"--bind-ro={bundles['py310'].parent}:/srv/bundles", "--tmpfs=/usr/local",
             f"--bind-ro={python}:{PY310_AT}",
             f"--bind-ro={drop}:/etc/systemd/system/clusterdiag-agent.service.d"]
    with booted(tmp_path / "nspawn.log", *binds) as init:
        _install(init, bundles["py310"], env=env)
        venv = _ok(inside(init, "cat", "/opt/clusterdiag/current/pyvenv.cfg"))
        assert "version_info = 3.10" in venv or "version = 3.10" in venv, venv
        assert _run_simulated(init, env)["verdict"] == "pass"
        inside(init, "systemctl", "enable", "--now", "clusterdiag-agent", timeout=90)
        _wait_agent(init)
        _ok(inside(init, "/opt/clusterdiag/current/share/clusterdiag/install.sh", "uninstall",
                   env=env))
        assert inside(init, "test", "-e", "/opt/clusterdiag").returncode != 0


def test_aarch64_bundle_has_only_wheels_for_its_platform(tmp_path: Path) -> None:
    (bundle,) = build(REPO, tmp_path, "--arch", "aarch64", "--python", "3.10")
    assert bundle.name == f"clusterdiag-{_project_version()}-py310-aarch64.tar.gz"
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        meta = json.load(tar.extractfile(f"{top}/bundle.json"))  # type: ignore[arg-type]
        manifest = tar.extractfile(f"{top}/SHA256SUMS").read().decode()  # type: ignore[union-attr]
    assert meta["arch"] == "aarch64"
    assert meta["python"] == "3.10"
    listed = {line.split("  ", 1)[1] for line in manifest.splitlines()}
    files = {n.split("/", 1)[1] for n in names if "/" in n and not n.endswith("/wheels")}
    assert listed == files - {"SHA256SUMS"}
    binary = [w for w in meta["wheels"] if not w.endswith("-none-any.whl")]
    assert binary, meta["wheels"]  # PyYAML, aiohttp ... are compiled
    assert all(w.endswith("aarch64.whl") for w in binary), binary
    assert any(w.startswith("clusterdiag-") for w in meta["wheels"])
    assert any(w.startswith("pip-") for w in meta["wheels"])


def _project_version() -> str:
    found = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert found is not None
    return found[1]
