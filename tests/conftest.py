"""Shared helpers: run the real command in a subprocess, the way users and Slurm do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


# The project's bytecode, compiled once per session: with PYTHONDONTWRITEBYTECODE set (as
# it is on this machine kind) and a fresh clone holding no __pycache__, every process the
# suite starts (hundreds of ``python -m clusterdiag.agent``, each xdist worker) would
# compile every project module it imports from source again, about a quarter of a CLI
# run's CPU. The variable stops Python writing bytecode as it imports, not reading it, so
# the controller writes it once, where Python looks (each package's __pycache__, ignored
# by git; not PYTHONPYCACHEPREFIX, which would hide the standard library's and the
# installed packages' bytecode from every process). Python checks each .pyc against its
# source's mtime and size, so a module edited later is compiled afresh.
#
# The same holds for pytest's assertion rewriting of the test modules (pytest's
# assertion/rewrite.py ``exec_module``: it writes its cached, rewritten .pyc only when
# ``sys.dont_write_bytecode`` is false, and reads one whatever the flag says). Rewriting is
# about two thirds of a collection's CPU, and every xdist worker collects the whole
# suite, so the controller has the test modules it was given rewritten once, before the
# workers start: one collection per core, each over a share of the files, in processes
# that may write bytecode (where this hook returns at once).
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode:
        return  # an xdist worker (the controller compiled), or Python writes it anyway
    import compileall

    for package in ("agent", "checks", "reports"):
        compileall.compile_dir(REPO / package, quiet=1)
    if getattr(config.option, "numprocesses", None):
        _rewrite_test_modules(config.invocation_params.dir, config.args)


def _rewrite_test_modules(where: Path, args: list[str]) -> None:
    """pytest's rewritten .pyc of every test module under ``args`` that has none newer than
    its source (named as pytest names it: ``PYTEST_TAG``), written by one
    ``--collect-only`` per core; a module that fails to import is left for the run to say."""
    tag = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}"
    files: list[Path] = []
    for arg in args:
        path = where / arg.split("::", 1)[0]
        for module in sorted(path.rglob("test_*.py")) if path.is_dir() else [path]:
            cached = module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"
            if not cached.exists() or cached.stat().st_mtime < module.stat().st_mtime:
                files.append(module)
    shares = [files[i::os.cpu_count() or 1] for i in range(os.cpu_count() or 1)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    collections = [subprocess.Popen(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n0", "-p", "no:cacheprovider",
         *map(str, share)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        cwd=REPO) for share in shares if share]
    for collection in collections:
        collection.wait()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: the suite mostly waits (on child processes, sockets and deadlines), so
    three workers per core keep the CPU busy (on this 2-core machine kind two per core left
    it a third idle); ``CLUSTERDIAG_TEST_WORKERS`` overrides."""
    given = os.environ.get("CLUSTERDIAG_TEST_WORKERS")
    return int(given) if given else 3 * (os.cpu_count() or 1)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests that need a resource to themselves share an ``xdist_group``; xdist's loadgroup
    marks each such test's node id with its group, on the workers, after collection. A
    pytest whose node ids xdist cannot mark runs them on any worker, at once, silently
    (pytest-dev/pytest-xdist#1386): each such test fails saying so, the rest run."""
    if getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid \
            and item.get_closest_marker("xdist_group"):
        pytest.fail(f"xdist did not run this test in its xdist_group: pytest "
                    f"{pytest.__version__} and this xdist do not work together; install the "
                    "versions pyproject.toml's test extra allows", pytrace=False)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A parameter too long to read in a test's id (a megabyte of garbage) is named by its
    type and length: pytest spells a bytes or str value out whole, and the id reaches every
    child process's environment (``PYTEST_CURRENT_TEST``), where one string may not pass
    the kernel's MAX_ARG_STRLEN (128 KiB, include/uapi/linux/binfmts.h): E2BIG."""
    if isinstance(val, (bytes, str)) and len(val) > 200:
        return f"{type(val).__name__}-of-{len(val)}"
    return None


def run_cli(*args: str, timeout: float = 60, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "clusterdiag.agent", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, input=stdin, check=False)

