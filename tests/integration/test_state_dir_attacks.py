"""The state directory as an attacker finds it: links planted by the user who
owns it (``nobody`` standing in for ``User=clusterdiag``) must not make the agent, or root's
``agent --clear``, delete, overwrite or give away a file outside it; a directory others may
write is refused; the prolog (root) reads ``report.json`` without blocking on a FIFO or
reading ``/dev/zero`` into memory; a token file others may write is refused."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import users
from tests.conftest import run_cli
from tests.integration.test_daemon_ownership import EVENT
from tests.integration.test_prolog_cli import Slurm, write_config
from tests.users import NOBODY, as_nobody

_WHY = users.why_nobody_cannot_run_clusterdiag()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

TOKEN = "state-dir-attack-token-0123456789"
# The prolog's budget here is 20 s, not 8: it keeps 6 s of it for two scontrol calls, and
# on a loaded 2-core machine the simulated GPUs need more than the 0.5 s left of 8 s.
PROLOG_BUDGET_S = 20
PROLOG_BOUND_S = PROLOG_BUDGET_S + 10.0


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory nobody can reach (pytest's tmp_path is root-only)."""
    path = Path(tempfile.mkdtemp(prefix="clusterdiag-attack-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path)


def _state_of_as_nobody(base: Path) -> Path:
    state = base / "state"
    state.mkdir(mode=0o750)
    (state / "events.json").write_text(json.dumps({"version": 1, "events": [EVENT]}))
    for p in (state, state / "events.json"):
        os.chown(p, NOBODY, NOBODY)
    return state


def _agent_as_as_nobody(state: Path, seconds: float) -> subprocess.CompletedProcess[str]:
    """The agent as the state dir's owner for ``seconds`` (or until it exits)."""
    proc = subprocess.Popen(as_nobody(sys.executable, "-m", "clusterdiag.agent", "agent",
                                   "--simulate", "dgx-h100", "--state-dir", str(state),
                                   "--listen", "127.0.0.1:0", "--interval", "1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd="/", start_new_session=True)
    try:
        _, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o752])
def test_a_state_dir_others_may_write_is_refused_in_one_line(tmp_path: Path, mode: int) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir", str(state),
                   "--listen", "127.0.0.1:0", timeout=60)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "writable by group or others" in lines[0]
    assert not (state / "agent.json").exists()


def test_a_state_dir_of_another_user_is_refused(base: Path) -> None:
    state = base / "state"
    state.mkdir(mode=0o755)  # root's
    proc = subprocess.run(as_nobody(sys.executable, "-m", "clusterdiag.agent", "agent",
                                 "--simulate", "dgx-h100", "--state-dir", str(state),
                                 "--listen", "127.0.0.1:0"),
                          capture_output=True, text=True, timeout=60, check=False, cwd="/")
    assert proc.returncode == 3, proc.stderr
    assert "owned by uid 0" in proc.stderr.strip().splitlines()[-1], proc.stderr


def test_a_clear_link_cannot_make_the_agent_delete_files_elsewhere(base: Path) -> None:
    state = _state_of_as_nobody(base)
    victim = base / "victim"
    victim.mkdir()
    (victim / EVENT["id"]).write_text("precious")
    (victim / "all").write_text("precious too")
    for p in (victim, victim / EVENT["id"], victim / "all"):
        os.chown(p, NOBODY, NOBODY)
    (state / "clear").symlink_to(victim)
    os.chown(state / "clear", NOBODY, NOBODY, follow_symlinks=False)
    done = _agent_as_as_nobody(state, seconds=60)  # it refuses at start: exits long before
    assert (victim / EVENT["id"]).read_text() == "precious"
    assert (victim / "all").read_text() == "precious too"
    assert done.returncode == 3, done.stderr
    assert "clear" in done.stderr.strip().splitlines()[-1], done.stderr
    assert "Traceback" not in done.stderr


def test_roots_clear_follows_no_planted_temp_link(base: Path) -> None:
    state = _state_of_as_nobody(base)
    (state / "clear").mkdir(mode=0o750)
    os.chown(state / "clear", NOBODY, NOBODY)
    victim = base / "root-secret"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    # The old writer's temp name was .tmp-<name>.<pid>: plant one for every pid the
    # clear below can get, as the state dir's owner may.
    planter = ("import os, sys\nfor pid in range(int(sys.argv[2]), int(sys.argv[2]) + 600):\n"
               "    for name in ('events.json', 'probe'):\n"
               "        os.symlink(sys.argv[3], f'{sys.argv[1]}/.tmp-{name}.{pid}')\n")
    planted = subprocess.run(as_nobody(sys.executable, "-c", planter, str(state), str(last + 1),
                                    str(victim)), capture_output=True, text=True, timeout=60,
                             check=False)
    assert planted.returncode == 0, planted.stderr
    done = run_cli("agent", "--state-dir", str(state), "--clear", EVENT["id"], timeout=60)
    assert done.returncode == 0, done.stderr
    info = victim.stat()
    assert victim.read_text() == "root's own\n"
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o600)
    saved = json.loads((state / "events.json").read_text())
    assert saved["events"][0]["cleared"], saved
    assert (state / "events.json").stat().st_uid == NOBODY


@pytest.fixture
def prolog_site(tmp_path: Path) -> tuple[Path, Slurm]:
    slurm = Slurm(tmp_path)
    (tmp_path / "spec.yaml").write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n")
    write_config(tmp_path, slurm, prolog={"budget_s": PROLOG_BUDGET_S})
    (tmp_path / "state").mkdir(mode=0o750)
    return tmp_path, slurm


def _prolog(root: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """The prolog as slurmd runs it, in at most 1 GiB of address space: a reader that
    slurps /dev/zero dies of it instead of taking the shared machine's memory."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "clusterdiag.agent", "prolog", "--simulate",
         str(root / "spec.yaml"), "--config", str(root / "config.yaml")],
        capture_output=True, text=True, timeout=40, check=False, cwd="/",
        env={"SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "4711", "SLURM_JOB_USER": "alice",
             "PYTHONPATH": os.environ.get("PYTHONPATH", "")}, preexec_fn=limit)
    return proc, time.monotonic() - started


@pytest.mark.parametrize("kind", ["fifo", "dev-zero link", "huge file"])
def test_the_prolog_reads_no_report_that_is_not_a_small_regular_file(
        prolog_site: tuple[Path, Slurm], kind: str) -> None:
    root, slurm = prolog_site
    report = root / "state" / "report.json"
    if kind == "fifo":
        os.mkfifo(report)
    elif kind == "dev-zero link":
        report.symlink_to("/dev/zero")
    else:
        with open(report, "wb") as f:
            f.truncate(3 << 30)  # sparse: 3 GiB that cost no disk
    proc, took = _prolog(root)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert took < PROLOG_BOUND_S, (took, proc.stderr)
    assert "running the quick checks" in proc.stderr, proc.stderr
    assert "agent report" in proc.stderr
    assert slurm.updates() == []


@pytest.mark.parametrize("mode", [0o660, 0o620, 0o602])
def test_a_token_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(mode)
    config = tmp_path / "c.yaml"
    config.write_text(f"agent: {{token_file: {token}}}\n")
    proc = run_cli("agent", "--simulate", "dgx-h100", "--config", str(config),
                   "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0", timeout=30)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "chmod 600" in lines[0]


def test_a_fifo_as_token_file_is_refused_without_blocking(tmp_path: Path) -> None:
    token = tmp_path / "token"
    os.mkfifo(token, 0o600)
    config = tmp_path / "c.yaml"
    config.write_text(f"agent: {{token_file: {token}}}\n")
    proc = run_cli("agent", "--simulate", "dgx-h100", "--config", str(config),
                   "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0", timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "not a regular file" in proc.stderr.strip().splitlines()[-1], proc.stderr
