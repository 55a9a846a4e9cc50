"""What the agent process imports, in a fresh interpreter: the daemon serves HTTP and never
makes a request, so aiohttp's client (and the CA bundle its connector loads at import,
agent/daemon/server_only.py) stays out, while any code that asks for the client in
the same process still gets the real package; and it writes /metrics itself
(agent/daemon/exposition.py), so prometheus_client and the HTTP servers it imports stay
out too; its options name the line format's limits without the cluster report model and
ClusterShell (reports/render/line_limits.py); and the console script starts it without click
(agent/launch.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from clusterdiag.agent.daemon.server_only import _version
from tests.integration.daemon_helpers import AgentProc

# aiohttp's client side: aiohttp/__init__.py imports these, aiohttp.web does not.
CLIENT = ("aiohttp.client", "aiohttp.connector", "aiohttp.cookiejar", "aiohappyeyeballs")
# prometheus_client, and what its exposition module imports for its own servers.
PROMETHEUS_CLIENT = ("prometheus_client", "http.server", "wsgiref.simple_server",
                     "socketserver")
# The cluster report model, its renderer and ClusterShell: the agent judges one node.
CLUSTER_REPORT = ("ClusterShell", "clusterdiag.reports.model.cluster",
                  "clusterdiag.reports.render.line")


def _run(code: str) -> object:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_agent_command_loads_no_http_client() -> None:
    got = _run("import json, sys\n"
               "import clusterdiag.agent.cli.agent\n"
               f"print(json.dumps({{'client': [m for m in {CLIENT!r} if m in sys.modules]}}))")
    assert got == {"client": []}


def test_the_agent_command_loads_no_prometheus_client() -> None:
    got = _run("import json, sys\n"
               "import clusterdiag.agent.cli.agent\n"
               f"print(json.dumps([m for m in {PROMETHEUS_CLIENT!r} if m in sys.modules]))")
    assert got == []


def test_the_agent_command_loads_no_cluster_report() -> None:
    got = _run("import json, sys\n"
               "import clusterdiag.agent.cli.agent\n"
               f"print(json.dumps([m for m in {CLUSTER_REPORT!r} if m in sys.modules]))")
    assert got == []


def test_the_client_loads_when_the_same_process_asks_for_it() -> None:
    got = _run("import json, sys\n"
               "from clusterdiag.agent.daemon import server\n"
               "before = 'aiohttp.client' in sys.modules\n"
               "import aiohttp\n"
               "from aiohttp import ClientSession, ClientTimeout, web\n"
               "from aiohttp.http import SERVER_SOFTWARE\n"
               "print(json.dumps({'before': before, 'version': aiohttp.__version__,\n"
               "    'server': SERVER_SOFTWARE.split('/')[-1],\n"
               "    'session': ClientSession.__module__, 'web': web is server.web,\n"
               "    'timeout': aiohttp.ClientTimeout is ClientTimeout}))")
    assert got == {"before": False, "version": version("aiohttp"),
                   "server": version("aiohttp"), "session": "aiohttp.client", "web": True,
                   "timeout": True}


def test_aiohttp_imported_first_is_left_as_it_is() -> None:
    got = _run("import json, sys\n"
               "import aiohttp\n"
               "from clusterdiag.agent.daemon import server_only\n"
               "print(json.dumps({'registered': server_only.register(),\n"
               "    'same': sys.modules['aiohttp'] is aiohttp}))")
    assert got == {"registered": False, "same": True}


def test_an_init_without_its_version_line_falls_back(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from .version import __version__\n")
    assert _version(init) is None
    assert _version(tmp_path / "absent.py") is None
    init.write_text('__version__ = "3.9.5"\n\nfrom . import hdrs\n')
    assert _version(init) == "3.9.5"


def test_the_running_agent_never_imports_click(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Started as its unit starts it (``python -m clusterdiag.agent`` runs the console
    script's launcher), through its first collection and report: Python's ``-X importtime``
    log (PYTHONPROFILEIMPORTTIME, docs.python.org/3/using/cmdline.html) names every module
    the process imported, those loaded late included."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    agent = AgentProc(tmp_path)
    try:
        agent.wait_ready()
    finally:
        agent.stop()
    # "import time: self [us] | cumulative | imported package", one line per import
    imported = {line.rsplit("|", 1)[-1].strip() for line in agent.log().splitlines()
                if line.startswith("import time:")}
    assert "clusterdiag.agent.daemon.loop" in imported  # the log holds the agent's imports
    assert {m for m in imported if m.split(".")[0] == "click"} == set()
    assert {m for m in imported if m.startswith("clusterdiag.agent.cli")} == set()
