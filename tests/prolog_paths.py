"""What the Slurm programs load, measured: the launcher alone, the prolog with a fresh agent
report, with one that skipped a privileged check (the re-run's lean path) and without one,
each in a fresh interpreter that sees our code as a plain install
does. tests/unit/test_prolog_imports.py holds them to the sets pinned in
tests/fixtures/prolog_imports.json, which ``python -m dev.regenerate`` rewrites (``generated``)
so that a change of either path shows as a diff in review."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from clusterdiag.agent.read import nvml_library
from tests.conftest import REPO

PINNED = REPO / "tests/fixtures/prolog_imports.json"
PATHS = ("launcher", "fresh", "lean", "recorded", "no report")

# Each probe prints the modules loaded as a Python literal: importing json to write them
# would count json as loaded.
_BARE = "import sys; print(sorted(sys.modules))"
_LAUNCHER = "import sys; import clusterdiag.agent.launch; print(sorted(sys.modules))"
_PROLOG = """
import sys
from clusterdiag.agent.settings import config_cache
config_cache.DIRECTORY = sys.argv[3]
sys.argv = ["clusterdiag", "prolog", "--root", sys.argv[1], "--config", sys.argv[2],
            *sys.argv[4:]]
from clusterdiag.agent.launch import main
try:
    main()
except SystemExit:
    pass
print(sorted(sys.modules))
"""


def _isolated(tree: Path) -> dict[str, str]:
    """The environment of a probe that sees our code as a plain install does: ``-S`` keeps
    site's ``.pth`` files out (an editable install's finder alone loads pathlib, re, enum
    and some forty more before any of ours), and ``PYTHONPATH`` names a tree of links laid
    out as the package (agent/ is clusterdiag/agent) and the venv's site-packages."""
    (tree / "clusterdiag").mkdir()
    for folder in ("agent", "checks", "reports"):
        (tree / "clusterdiag" / folder).symlink_to(REPO / folder)
    paths = sysconfig.get_paths()
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        dict.fromkeys([str(tree), paths["purelib"], paths["platlib"]]))}


def _modules(env: dict[str, str], code: str, *args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-S", "-c", code, *args], capture_output=True,
                          text=True, check=True, timeout=120, env=env)
    return set(ast.literal_eval(proc.stdout.splitlines()[-1]))


# What the unprivileged agent says of nccl.acs: it cannot read PCIe extended config space.
ACS_SKIPPED = {"check": "nccl.acs", "status": "skip", "component": "node",
               "message": "PCIe extended config space not readable"}


def _fresh_report(state: Path, node: str, findings: list[dict[str, str]]) -> None:
    state.mkdir()
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    (state / "report.json").write_text(json.dumps({
        "node": node, "profile": {"name": "dgx-h100"}, "version": "0.1.0",
        "started_at": started, "duration_s": 1.0, "level": "quick", "mode": "agent",
        "findings": findings}))


def measure() -> dict[str, set[str]]:
    """Every module (ours, the standard library's, third parties') each path has loaded when
    it ends, a bare interpreter's included (``bare``): the launcher alone, the prolog with a
    fresh agent report (where NVML's library is missing: that is the path it pins; absent
    elsewhere), with one that skipped nccl.acs (re-run on the lean path on an empty tree,
    gpu.processes skipping for NVML; absent where NVML's library loads too), the same again
    (the re-run's record standing) and without one (its widest path: every quick check on
    an empty tree)."""
    with tempfile.TemporaryDirectory(prefix="clusterdiag-paths-") as work:
        tmp = Path(work)
        (tmp / "links").mkdir()
        env = _isolated(tmp / "links")
        found = {"bare": _modules(env, _BARE), "launcher": _modules(env, _LAUNCHER)}
        config = tmp / "config.yaml"
        if nvml_library.missing():
            _fresh_report(tmp / "state", "n1", [])
            config.write_text(json.dumps({"agent": {"state_dir": str(tmp / "state")},
                                          "prolog": {"drain": False}}))
            cache = str(tmp / "cache")
            found["fresh"] = _modules(env, _PROLOG, str(tmp), str(config), cache,
                                      "--node", "n1")
            # A YAML config, parsed once and then read from the prolog's validated copy.
            config.write_text(f"agent:\n  state_dir: {tmp / 'state'}\nprolog:\n  drain: false\n")
            _modules(env, _PROLOG, str(tmp), str(config), cache, "--node", "n1")
            found["yaml cached"] = _modules(env, _PROLOG, str(tmp), str(config), cache,
                                            "--node", "n1")
            _fresh_report(tmp / "skipped", "n1", [ACS_SKIPPED])
            config.write_text(json.dumps({"agent": {"state_dir": str(tmp / "skipped")},
                                          "prolog": {"drain": False}}))
            found["lean"] = _modules(env, _PROLOG, str(tmp), str(config), cache, "--node", "n1")
            # The next job's: nccl.acs as the first one recorded it (slurm/rerun_record.py).
            found["recorded"] = _modules(env, _PROLOG, str(tmp), str(config), cache,
                                         "--node", "n1")
        config.write_text(json.dumps({"agent": {"state_dir": str(tmp / "nothing")},
                                      "prolog": {"drain": False}}))
        found["no report"] = _modules(env, _PROLOG, str(tmp), str(config), str(tmp / "cache"))
    return found


def ours(measured: dict[str, set[str]], path: str) -> frozenset[str]:
    """Our modules a path loaded beyond a bare interpreter."""
    return frozenset(m for m in measured[path] - measured["bare"]
                     if m == "clusterdiag" or m.startswith("clusterdiag."))


def pinned() -> dict[str, frozenset[str]]:
    """The pinned sets, by path."""
    data = json.loads(PINNED.read_text(encoding="utf-8"))
    return {path: frozenset(data[path]) for path in PATHS}


def generated(measured: dict[str, set[str]] | None = None) -> dict[Path, str]:
    """The pin file as today's code loads it. Where NVML's library loads (a GPU node) the
    fresh-report and lean paths are not the ones pinned: their committed sets are kept."""
    measured = measured if measured is not None else measure()
    sets = {path: sorted(ours(measured, path)) for path in PATHS if path in measured}
    for path in ("fresh", "lean", "recorded"):
        if path not in sets and PINNED.is_file():
            sets[path] = sorted(pinned()[path])
    body = json.dumps({path: sets[path] for path in PATHS}, indent=1) + "\n"
    return {PINNED: body}
