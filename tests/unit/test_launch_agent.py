"""The agent's click-free start (agent/launch.py): the flags its unit passes reach the daemon
as click would pass them; anything else reaches click, which answers exactly as before.

Each command line runs in a fresh interpreter twice, through the launcher and through the
click CLI alone, with the same program name: both must write the same bytes and exit
alike, and only the command lines click has to answer may load the click CLI in the
launcher's run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterdiag.agent import launch
from clusterdiag.agent.cli.agent import agent

# Runs one command line and prints, last, its exit code and whether the click CLI was imported
# (click itself loads on the launcher's error exit too: it writes the line, as the CLI would).
_HARNESS = """\
import json, sys
sys.argv = ["clusterdiag", *json.loads(sys.argv[1])]
if {click_first}:
    from clusterdiag.agent.cli import main
else:
    from clusterdiag.agent.launch import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
sys.stderr.flush()
print(json.dumps({{"code": code, "cli": "clusterdiag.agent.cli" in sys.modules}}))
"""


def _run(args: list[str], *, click_first: bool) -> tuple[str, str, dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, "-c", _HARNESS.format(click_first=click_first), json.dumps(args)],
        capture_output=True, text=True, timeout=120, check=True)
    *out, last = proc.stdout.splitlines(keepends=True)
    return "".join(out), proc.stderr, json.loads(last)


def test_the_launchers_flags_are_the_agent_commands_options() -> None:
    """Every option of ``clusterdiag agent`` but ``--clear`` is parsed by the launcher, and
    passed by the keyword click passes it by."""
    click_flags = {opt: param.name for param in agent.params for opt in param.opts}
    assert {f: click_flags[f] for f in launch.AGENT_FLAGS} == launch.AGENT_FLAGS
    assert set(click_flags) - set(launch.AGENT_FLAGS) == {"--clear"}
    assert {k for k, v in launch.AGENT_FLAGS.items() if v in launch.AGENT_PATHS} == {
        opt for param in agent.params if param.type.name == "path" for opt in param.opts}


def test_the_units_command_line_is_parsed_as_click_parses_it() -> None:
    got = launch.agent_flags(["--config", "/etc/clusterdiag/config.yaml", "--interval=2.5",
                              "--listen", "0.0.0.0:9464", "--state-dir", "/var/lib/x",
                              "--level", "full", "--level", "quick"])
    assert got == {"config_path": Path("/etc/clusterdiag/config.yaml"), "root": None,
                   "kernel_log": None, "simulate": None, "node": None, "profile": None,
                   "level": "quick", "listen": "0.0.0.0:9464", "interval": 2.5,
                   "state_path": Path("/var/lib/x")}
    assert launch.agent_flags([]) == dict.fromkeys(launch.AGENT_FLAGS.values())


@pytest.mark.parametrize("args", [
    ["--help"], ["-h"], ["--clear", "all"], ["--bogus"], ["--interval", "soon"],
    ["--interval"], ["--level", "deep"], ["--listen="], ["--", "--root", "/"],
])
def test_what_the_launcher_does_not_know_goes_to_click(args: list[str]) -> None:
    assert launch.agent_flags(args) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root may read any file")
def test_a_path_it_may_not_read_goes_to_click(tmp_path: Path) -> None:
    secret = tmp_path / "config.yaml"
    secret.write_text("{}")
    secret.chmod(0)
    assert launch.agent_flags(["--config", str(secret)]) is None
    assert launch.agent_flags(["--config", str(tmp_path / "absent.yaml")]) is not None


@pytest.mark.parametrize("args", [
    ["agent", "--help"], ["agent", "--bogus"], ["agent", "--interval", "soon"],
])
def test_click_answers_what_the_launcher_does_not_know(args: list[str]) -> None:
    assert _run(args, click_first=False) == _run(args, click_first=True)


def test_a_start_error_reads_the_same_without_click(tmp_path: Path) -> None:
    """Exit 2 and the same line, the flag or the config refused, and the click CLI never
    loaded."""
    config = tmp_path / "config.yaml"
    config.write_text("agent: {interval_s: soon}\n")
    for args in (["agent", "--interval", "0.001"],
                 ["agent", "--config", str(config), "--simulate", "dgx-h100",
                  "--state-dir", str(tmp_path / "state")]):
        out, err, fast = _run(args, click_first=False)
        click_out, click_err, slow = _run(args, click_first=True)
        assert (out, err, fast["code"]) == (click_out, click_err, slow["code"]), args
        assert fast["code"] == 2, err
        assert err.startswith("clusterdiag: "), err
        assert err.count("\n") == 1, err
        assert fast["cli"] is False, args
