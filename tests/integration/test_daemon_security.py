"""The agent is safe to run: refuses to expose itself without a token, 401 says nothing,
TLS works, and request size, header count and slow senders are cut off."""

from __future__ import annotations

import importlib.util
import json
import socket
import ssl
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.daemon_helpers import AgentProc, get
from tests.integration.http_load import self_signed_cert

TOKEN = "another-secret-token-0123456789"


def _token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0o600)
    return path


def test_non_loopback_without_token_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir", str(tmp_path / "s"),
                   "--listen", "0.0.0.0:9464", timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "token_file" in lines[0]
    assert "allow_unauthenticated" in lines[0]
    assert not (tmp_path / "s").exists()


def test_world_readable_token_file_is_refused(tmp_path: Path) -> None:
    token = _token_file(tmp_path)
    token.chmod(0o644)
    config = tmp_path / "c.yaml"
    config.write_text(f"agent: {{token_file: {token}}}\n")
    proc = run_cli("agent", "--simulate", "dgx-h100", "--config", str(config),
                   "--state-dir", str(tmp_path / "s"), timeout=30)
    assert proc.returncode == 2
    assert "chmod 600" in proc.stderr


def test_unusable_state_dir_exits_3(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir",
                   str(tmp_path / "file" / "state"), "--listen", "127.0.0.1:0", timeout=30)
    assert proc.returncode == 3
    assert proc.stderr.startswith("clusterdiag: state directory")
    assert "Traceback" not in proc.stderr


def test_token_protects_everything_but_healthz(tmp_path: Path) -> None:
    config = {"agent": {"token_file": str(_token_file(tmp_path))}}
    agent = AgentProc(tmp_path, config=config, interval=30)
    try:
        url = agent.wait_ready()
        assert get(f"{url}/healthz")[0] == 200
        bodies = set()
        for path in ("/v1/report", "/v1/snapshot", "/metrics"):
            for token in (None, "wrong", TOKEN[:-1], TOKEN + "x"):
                status, body, headers = get(url + path, token)
                assert status == 401
                assert headers["WWW-Authenticate"].startswith("Bearer")
                bodies.add(body)
            assert get(url + path, TOKEN)[0] == 200
        assert bodies == {b"unauthorized\n"}  # never says why
        status, body, _ = get(f"{url}/v1/report", token=None)
        assert b"node" not in body
    finally:
        agent.stop()


def test_clear_without_a_token_configured_is_forbidden(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=30)
    try:
        url = agent.wait_ready()
        assert get(f"{url}/v1/clear/all", method="POST")[0] == 403
        assert get(f"{url}/v1/report", method="POST")[0] == 405
    finally:
        agent.stop()


def _raw(url: str, payload: bytes, wait: float = 5.0) -> bytes:
    host, port = url[7:].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(payload)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def test_request_limits(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=30)
    try:
        url = agent.wait_ready()
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(100))
        answer = _raw(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        assert answer.split(b" ", 2)[1] in (b"400", b"431"), answer[:100]
        long_header = b"X-Long: " + b"a" * 10000 + b"\r\n"
        answer = _raw(url, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + long_header + b"\r\n")
        assert answer.split(b" ", 2)[1] in (b"400", b"431"), answer[:100]
        body = b"x" * 5000
        answer = _raw(url, b"POST /v1/clear/all HTTP/1.1\r\nHost: x\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert answer.split(b" ", 2)[1] in (b"403", b"413"), answer[:100]
        # a sender that never finishes its headers is cut off after the keepalive limit
        # (5 s; aiohttp's own would hold it 75 s), with slack for a loaded machine
        host, port = url[7:].rsplit(":", 1)
        started = time.monotonic()
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            assert sock.recv(100) == b""
        assert time.monotonic() - started < 30
    finally:
        agent.stop()


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    made = self_signed_cert(tmp_path)
    if isinstance(made, str):
        pytest.skip(made)
    return made


def test_tls(tmp_path: Path, cert: tuple[Path, Path]) -> None:
    crt, key = cert
    agent = AgentProc(tmp_path, config={"agent": {"tls_cert": str(crt), "tls_key": str(key)}},
                      interval=30)
    try:
        url = agent.wait_ready().replace("http://", "https://")
        context = ssl.create_default_context(cafile=str(crt))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                             urllib.request.HTTPSHandler(context=context))
        with opener.open(f"{url}/v1/report", timeout=10) as resp:
            assert json.load(resp)["schema"] == "clusterdiag/node-report/v1"
        # the agent's TLS read buffer is small (agent/daemon/gate.py): a large answer
        # still arrives whole
        with opener.open(f"{url}/metrics", timeout=10) as resp:
            body = resp.read()
        assert len(body) > 100_000
        assert body.endswith(b"\n")
        assert b"clusterdiag_node_ready" in body
        plain = _raw(url.replace("https://", "http://"), b"GET /healthz HTTP/1.1\r\n\r\n", 3)
        assert b"200 OK" not in plain
        assert _openssl_mapped(agent.proc.pid) == _OPENSSL_MODULES
    finally:
        agent.stop()


# OpenSSL's two CPython modules where this build has them as extension modules (files a
# process maps when it imports them).
_OPENSSL_MODULES = {name for name in ("_ssl", "_hashlib")
                    if (spec := importlib.util.find_spec(name)) is not None
                    and (spec.origin or "").endswith(".so")}


def _openssl_mapped(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name in _OPENSSL_MODULES if f"/{name}." in maps}


def test_an_agent_without_tls_loads_no_openssl_and_still_serves(tmp_path: Path) -> None:
    """Without tls_cert/tls_key the agent keeps OpenSSL's modules out (agent/daemon/
    openssl.py): none is mapped into it, and it serves, hashes and checks its token as
    with them."""
    if not _OPENSSL_MODULES:
        pytest.skip("this Python has no OpenSSL extension modules to keep out")
    token = _token_file(tmp_path)
    agent = AgentProc(tmp_path, config={"agent": {"token_file": str(token)}}, interval=30)
    try:
        url = agent.wait_ready()
        assert _openssl_mapped(agent.proc.pid) == set()
        status, body, _ = get(f"{url}/v1/report", token=TOKEN)
        assert status == 200
        assert json.loads(body)["schema"] == "clusterdiag/node-report/v1"
        assert get(f"{url}/v1/report")[0] == 401
        assert get(f"{url}/v1/report", token=TOKEN[:-1] + "x")[0] == 401
        status, body, _ = get(f"{url}/metrics", token=TOKEN)
        assert status == 200
        assert b"clusterdiag_node_ready" in body
    finally:
        agent.stop()


def test_tls_needs_both_files(tmp_path: Path, cert: tuple[Path, Path]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"agent: {{tls_cert: {cert[0]}}}\n")
    proc = run_cli("agent", "--simulate", "dgx-h100", "--config", str(config),
                   "--state-dir", str(tmp_path / "s"), timeout=30)
    assert proc.returncode == 2
    assert "tls_cert and tls_key" in proc.stderr
