"""The agent's own limits, tried through the real command: a listen address already taken
(one line, exit 3), a connection flood against a low open-file limit (the node must still
be judged healthy and the prolog must still pass it), refreshes that must not starve
/healthz or /metrics, and the scrape paths a site may leave without the token."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import run_cli


def test_listen_address_in_use_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir", str(tmp_path / "s"),
                       "--listen", f"127.0.0.1:{port}", "--interval", "5", timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [line for line in lines if "level=" not in line] == [lines[-1]], proc.stderr
    assert lines[-1].startswith("clusterdiag: "), proc.stderr
    assert f"127.0.0.1:{port}" in lines[-1], lines[-1]
    assert "address already in use" in lines[-1], lines[-1]
